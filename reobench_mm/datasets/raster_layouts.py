"""The base of the segmentation datasets read in their official release layouts.

MMSegmentation's ``BaseSegDataset`` pairs an image and a label map by one relative name
(``img_dir/x.png`` with ``ann_dir/x.png``). The releases of the calibration study's sets
name them otherwise (CloudSEN12: one folder per patch with ``S2L1C.tif`` and
``labels/manual_hq.tif``; FLAIR #2: ``img/IMG_n.tif`` with ``msk/MSK_n.tif``; SpaceNet2:
``MUL/MUL_<chip>.tif`` with a mask written beside the release; DynamicEarthNet: split
files that name image folder, label file and month), so each of those datasets lists its
samples itself (:meth:`RasterLayoutDataset.find_samples`) and this base turns them into
MMSegmentation's data infos, with one check for all of them: every listed image and label
file exists, else one error names how many are missing and the first of them.

``ann_file`` keeps MMSegmentation's meaning, a split list with one sample id per line
(relative to ``data_root``); what an id is depends on the dataset (its class docstring
says). Without it a dataset lists every sample its layout holds (where the layout allows).

The classes' ``METAINFO`` hold, besides ``classes`` and ``palette``, the set's
``label_rules`` (:mod:`~reobench_mm.datasets.label_rules`) and ``band_names`` (every band
of its image files, in file order, as ``LoadMultiBandImageFromFile`` takes them).
"""
from __future__ import annotations

import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

from mmengine.fileio import list_from_file
from mmseg.datasets import BaseSegDataset

__all__ = ['RasterLayoutDataset', 'Sample', 'read_split_ids']

#: ``(sample_id, img_path, seg_map_path)`` of one sample.
Sample = Tuple[str, str, str]
#: How many missing files an error lists.
_LISTED = 3


def read_split_ids(path: str, what: str) -> List[str]:
    """The non-empty, stripped lines of the split list ``path``.

    Raises:
        FileNotFoundError: no such file. ValueError: a list without any id.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'{what}: split list (ann_file) {path!r} does not exist')
    ids = [line.strip() for line in list_from_file(path) if line.strip()]
    if not ids:
        raise ValueError(f'{what}: split list (ann_file) {path!r} names no sample')
    return ids


class RasterLayoutDataset(BaseSegDataset):
    """A ``BaseSegDataset`` whose samples a subclass lists from its release layout.

    Subclasses implement :meth:`find_samples`; ``img_suffix`` and ``seg_map_suffix``
    default to ``'.tif'``. Every other argument is ``BaseSegDataset``'s.
    """

    #: The layout a subclass reads, for the error that finds nothing.
    LAYOUT: str = ''

    def __init__(self, img_suffix: str = '.tif', seg_map_suffix: str = '.tif',
                 **kwargs) -> None:
        super().__init__(img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, **kwargs)

    @property
    def name(self) -> str:
        """The class name, for messages."""
        return type(self).__name__

    def image_root(self) -> str:
        """``data_prefix['img_path']`` (joined with ``data_root``), or ``data_root``."""
        return self.data_prefix.get('img_path') or self.data_root or ''

    def label_root(self) -> str:
        """``data_prefix['seg_map_path']`` (joined with ``data_root``), or the image
        root."""
        return self.data_prefix.get('seg_map_path') or self.image_root()

    def split_ids(self) -> Optional[List[str]]:
        """The ids of ``ann_file`` (None without one)."""
        return read_split_ids(self.ann_file, self.name) if self.ann_file else None

    def find_samples(self, ids: Optional[Sequence[str]]) -> List[Sample]:
        """The samples of the split: those of ``ids`` in their order, or (None) every
        sample of the layout in a fixed order."""
        raise NotImplementedError(f'{self.name} does not list its samples')

    def load_data_list(self) -> List[dict]:
        """MMSegmentation's data infos of :meth:`find_samples`' samples (plus their
        ``sample_id``).

        Raises:
            FileNotFoundError: no sample found, or listed images or label files missing.
        """
        samples = self.find_samples(self.split_ids())
        if not samples:
            raise FileNotFoundError(f'{self.name}: no sample found under '
                                    f'{self.image_root()!r}; expected {self.LAYOUT}')
        for kind, column in (('image', 1), ('label file', 2)):
            missing = [s[column] for s in samples if not osp.isfile(s[column])]
            if missing:
                raise FileNotFoundError(
                    f'{self.name}: {len(missing)} of {len(samples)} {kind}s do not exist, '
                    f'e.g. {missing[:_LISTED]} (expected {self.LAYOUT})')
        return [self._info(*sample) for sample in samples]

    def _info(self, sample_id: str, img_path: str, seg_map_path: str) -> Dict:
        return dict(sample_id=sample_id, img_path=img_path, seg_map_path=seg_map_path,
                    label_map=self.label_map, reduce_zero_label=self.reduce_zero_label,
                    seg_fields=[])
