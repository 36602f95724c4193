"""Version of reobench_mm, and the versions of the packages its numbers depend on."""
import platform
from typing import Dict, Optional

__version__ = '0.1.0'

#: name -> the distribution names it may be installed under (the first found counts).
VERSION_PACKAGES = {
    'torch': ('torch', ),
    'mmengine': ('mmengine', ),
    'mmcv': ('mmcv', 'mmcv-lite'),
    'mmseg': ('mmsegmentation', ),
    'mmdet': ('mmdet', ),
    'mmrotate': ('mmrotate', 'mmrotate-dev'),
    'numpy': ('numpy', ),
    'scipy': ('scipy', ),
    'opencv': ('opencv-python', 'opencv-python-headless', 'opencv-contrib-python',
               'opencv-contrib-python-headless'),
}


def package_versions() -> Dict[str, Optional[str]]:
    """Versions of Python, reobench_mm and :data:`VERSION_PACKAGES` (None for those not
    installed), read from package metadata without importing the packages."""
    from importlib import metadata
    versions: Dict[str, Optional[str]] = {'python': platform.python_version(),
                                          'reobench_mm': __version__}
    for key, dists in VERSION_PACKAGES.items():
        versions[key] = None
        for dist in dists:
            try:
                versions[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return {k: versions[k] for k in sorted(versions)}


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
