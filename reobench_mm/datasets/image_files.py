"""Cheap checks that a dataset's image and label files can be decoded, before a run
reads them.

OpenCV, which MMCV's ``LoadImageFromFile`` and ``LoadAnnotations`` decode through, ends
an empty file in ``!buf.empty()``, a file holding text in ``failed to load image``, and
decodes a truncated JPEG or PNG *without an error*, the missing rows grey or black: a
silently wrong image. :func:`image_file_problem` looks at a file's size, its first bytes
(the signature of its format) and, for the formats that end in a fixed marker, its last
bytes — a few hundred bytes per file, no decoding — and says what is wrong in words;
:func:`dataset_file_problems` does it for every image and label map a dataset lists,
and compares the size of each image with that of its label map (read from the files'
headers by Pillow).

The signatures and end markers are those of the formats' specifications (PNG: the
8-byte signature and the ``IEND`` chunk; JPEG: ``SOI`` ``FF D8 FF`` and ``EOI`` ``FF D9``;
TIFF: ``II*\\0``/``MM\\0*`` with the first directory's offset inside the file). A file of
a format not listed here is not judged (another loader may read it).
"""
from __future__ import annotations

import os
import os.path as osp
import warnings
from typing import Any, List, Optional, Tuple

__all__ = ['image_file_problem', 'dataset_file_problems', 'describe_file_problems',
           'IMAGE_SUFFIXES']

#: File name suffixes that promise an image OpenCV decodes (a file so named that holds
#: none of the signatures below is refused).
IMAGE_SUFFIXES = ('.png', '.jpg', '.jpeg', '.jpe', '.tif', '.tiff', '.bmp', '.gif', '.webp',
                  '.jp2')

_PNG = b'\x89PNG\r\n\x1a\n'
_SIGNATURES: Tuple[Tuple[bytes, str], ...] = (
    (_PNG, 'PNG'), (b'\xff\xd8\xff', 'JPEG'), (b'II*\x00', 'TIFF'), (b'MM\x00*', 'TIFF'),
    (b'II+\x00', 'BigTIFF'), (b'MM\x00+', 'BigTIFF'), (b'BM', 'BMP'), (b'GIF87a', 'GIF'),
    (b'GIF89a', 'GIF'), (b'\x00\x00\x00\x0cjP  \r\n\x87\n', 'JPEG 2000'),
    (b'\xff\x4f\xff\x51', 'JPEG 2000'))
_HEAD = 32
#: JPEG's end marker may be followed by a little padding; 0xFF D9 cannot occur inside
#: the entropy-coded data (a 0xFF byte there is followed by 0x00 or a restart marker).
_TAIL = 1024


def _format_of(head: bytes) -> Optional[str]:
    if head[:4] == b'RIFF' and head[8:12] == b'WEBP':
        return 'WebP'
    for signature, name in _SIGNATURES:
        if head.startswith(signature):
            return name
    return None


def _looks_like_text(head: bytes) -> bool:
    sample = head.lstrip(b'\xef\xbb\xbf')
    return bool(sample) and all(32 <= b < 127 or b in b'\t\r\n' for b in sample)


def _tiff_problem(head: bytes, size: int) -> Optional[str]:
    if head[2:4] not in (b'*\x00', b'\x00*'):
        return None  # BigTIFF: its 8-byte offsets are not checked
    offset = int.from_bytes(head[4:8], 'little' if head[:2] == b'II' else 'big')
    if offset < 8 or offset >= size:
        return (f'is a TIFF file whose first image directory lies at byte {offset}, '
                f'outside its {size} bytes (truncated or damaged)')
    return None


def image_file_problem(path: str) -> Optional[str]:
    """What is wrong with the image (or label map) file ``path``, in words (``'is
    empty'``, ``'holds text, not an image'``, ``'is a PNG file cut short ...'``), or
    None when its size, signature and end marker look right or its format is not one
    this module knows."""
    try:
        size = os.path.getsize(path)
        if size == 0:
            return 'is empty (0 bytes)'
        with open(path, 'rb') as handle:
            head = handle.read(_HEAD)
            handle.seek(max(0, size - _TAIL))
            tail = handle.read(_TAIL)
    except FileNotFoundError:
        return 'does not exist'
    except IsADirectoryError:
        return 'is a folder, not a file'
    except OSError as error:
        return f'cannot be read ({error.strerror or error})'
    found = _format_of(head)
    if found is None:
        if not path.lower().endswith(IMAGE_SUFFIXES):
            return None
        if _looks_like_text(head):
            return f'holds text ({head[:20]!r}...), not an image'
        return (f'is not an image of a format OpenCV decodes (its first bytes '
                f'{head[:8].hex(" ")} are no PNG, JPEG, TIFF, BMP, GIF, WebP or JPEG 2000 '
                'signature)')
    if found == 'PNG' and b'IEND' not in tail[-32:]:
        return (f'is a PNG file cut short: it lacks the closing IEND chunk ({size} bytes; '
                'truncated by an interrupted copy or download?)')
    if found == 'JPEG' and b'\xff\xd9' not in tail:
        return (f'is a JPEG file cut short: it lacks the end-of-image marker ({size} bytes; '
                'truncated by an interrupted copy or download?)')
    if found == 'TIFF':
        return _tiff_problem(head, size)
    return None


#: The sample fields of MMSeg's and MMRotate's datasets that name files a pipeline decodes.
_FILE_FIELDS = ('img_path', 'seg_map_path')


def dataset_file_problems(dataset: Any, limit: int = 5) -> Tuple[List[str], int, int]:
    """``(first problems, files with a problem, files checked)`` over the images and
    label maps ``dataset`` lists (its samples' ``img_path`` and ``seg_map_path``;
    wrappers through their ``get_data_info``): ``'<path> <problem>'`` for the first
    ``limit`` bad files. A dataset that cannot list its samples is not checked
    (``([], 0, 0)``); remote paths (``s3://...``) are not checked."""
    if not hasattr(dataset, 'get_data_info'):
        return [], 0, 0
    problems: List[str] = []
    bad = checked = 0
    for index in range(len(dataset)):
        info = dataset.get_data_info(index)
        paths = {}
        for name in _FILE_FIELDS:
            path = info.get(name) if isinstance(info, dict) else None
            if not isinstance(path, (str, os.PathLike)) or '://' in os.fspath(path):
                continue
            checked += 1
            paths[name] = path = osp.normpath(os.fspath(path))
            problem = image_file_problem(path)
            if problem is not None:
                bad += 1
                del paths[name]
                if len(problems) < limit:
                    problems.append(f'{path} {problem}')
        if len(paths) == 2:
            problem = _size_problem(paths['img_path'], paths['seg_map_path'])
            if problem is not None:
                bad += 1
                if len(problems) < limit:
                    problems.append(problem)
    return problems, bad, checked


def _size(path: str) -> Optional[Tuple[int, int]]:
    """``(height, width)`` from the file's header (Pillow reads no pixels to say it), or
    None where Pillow does not know the format."""
    from PIL import Image
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # a large scene's "decompression bomb" note
            with Image.open(path) as image:
                width, height = image.size
    except Exception:  # a format Pillow does not read: not judged
        return None
    return int(height), int(width)


def _size_problem(image: str, label: str) -> Optional[str]:
    """An image and its label map of different sizes (the evaluator would fail at the
    end with a tensor message that names neither)."""
    sizes = _size(image), _size(label)
    if None in sizes or sizes[0] == sizes[1]:
        return None
    return (f'{image} is {sizes[0][0]}×{sizes[0][1]} but its label map {label} is '
            f'{sizes[1][0]}×{sizes[1][1]} (an image and its labels must be the same size)')


def describe_file_problems(what: str, dataset: Any) -> Optional[str]:
    """One line saying which files of ``dataset`` (``what`` names it) cannot be decoded
    (:func:`dataset_file_problems`), or None when all look right."""
    problems, bad, checked = dataset_file_problems(dataset)
    if not bad:
        return None
    more = f'; and {bad - len(problems)} more' if bad > len(problems) else ''
    return (f'{what}: {bad} of its {checked} image and label files cannot be decoded: '
            f'{"; ".join(problems)}{more}. Replace or remove them (a copy or download that '
            'was interrupted?)')
