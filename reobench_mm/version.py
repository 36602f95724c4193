"""Version of reobench_mm."""
__version__ = '0.1.0'


def parse_version_info(version_str: str) -> tuple:
    """Parse ``'0.1.0'`` / ``'0.1.0rc1'`` into a tuple like OpenMMLab packages do."""
    parts = []
    for piece in version_str.split('.'):
        if piece.isdigit():
            parts.append(int(piece))
        else:
            digits = ''.join(ch for ch in piece if ch.isdigit())
            suffix = piece[len(digits):]
            parts.extend([int(digits), suffix])
    return tuple(parts)


version_info = parse_version_info(__version__)
