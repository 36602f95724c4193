"""Converters from the official releases of the benchmark datasets to the on-disk
layouts that MMSegmentation and MMRotate read.

- :mod:`.potsdam`: ISPRS Potsdam tiles -> 512x512 patches (``img_dir``/``ann_dir``).
- :mod:`.dior_r`: DIOR images + DIOR-R oriented XML -> DOTA-style text annotations.
- :mod:`.reobench_released`: REOBench's released corrupted sets -> their moved labels in
  the formats above and the ``corruption_files`` option reading them.

Every output file is written atomically (``reobench_mm.fileio``: a temporary ``.tmp``
file in the same folder, then renamed), so an interrupted conversion leaves no truncated
file behind and can simply be run again (its temporaries are removed then:
:func:`reobench_mm.fileio.remove_stale_temporaries`).
"""
from .dior_r import (DIOR_R_CLASSES, DIORObject, DIORXMLAnnotation,
                     convert_dior_r, dota_line, normalise_dior_class, parse_dior_xml)
from .potsdam import (POTSDAM_CLASSES, POTSDAM_CLASSES_5, POTSDAM_COLOURS,
                      POTSDAM_IGNORE_ID, POTSDAM_SPLITS, colour_to_label, convert_potsdam,
                      find_potsdam_tiles, patch_boxes, patch_starts)

__all__ = [
    'POTSDAM_CLASSES', 'POTSDAM_CLASSES_5',
    'POTSDAM_COLOURS', 'POTSDAM_IGNORE_ID', 'POTSDAM_SPLITS', 'colour_to_label',
    'convert_potsdam', 'find_potsdam_tiles', 'patch_boxes', 'patch_starts', 'DIOR_R_CLASSES',
    'DIORObject', 'DIORXMLAnnotation', 'convert_dior_r', 'dota_line', 'normalise_dior_class',
    'parse_dior_xml'
]
