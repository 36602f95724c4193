# The REOBench authors' task (oriented-rcnn_dior-r_reobench.py) for the patch-14 CLIP towers
# (lx709/REOBench: Detection/configs/DIOR/{RemoteCLIP_large,RS5M_large,RS5M_huge}.py): their
# pyramid scales the stride-14 tokens x4/x2/x1/x1/2 without resampling, i.e. maps at strides
# 3.5/7/14/28, and the head is told strides 4/7/14/28 (anchors 4/7/14/28/56). A config over
# this base gives the neck `patch_size=16` so that SimpleFeaturePyramid applies exactly those
# factors to the 57x57 tokens of an 800 px image (228/114/57/28) instead of first resizing
# them to the stride-16 grid. The finest level is thereby labelled stride 4 while it is 3.5:
# its anchors and RoI reads drift by 1/8 of their coordinate, up to 100 px at the far edge
# of an 800 px image (a bug of those files, reproduced here on purpose).
_base_ = ['./oriented-rcnn_dior-r_reobench.py']
model = dict(
    rpn_head=dict(anchor_generator=dict(strides=[4, 7, 14, 28, 56])),
    roi_head=dict(bbox_roi_extractor=dict(featmap_strides=[4, 7, 14, 28])))
