# The REOBench authors' task (oriented-rcnn_dior-r_reobench.py) for the patch-14 CLIP towers
# (lx709/REOBench: Detection/configs/DIOR/{RemoteCLIP_large,RS5M_large,RS5M_huge}.py): the
# head is told strides 4/7/14/28 (anchors 4/7/14/28/56). The authors' backbone class
# (Detection/mmrotate/models/backbones/CLIP.py) scales the stride-14 tokens x4 then
# bilinearly x3.5/4 for level 0 (about stride 4: 57 tokens -> 228 -> 199 px at 800 px),
# x2, x1 and x1/2 for the others (strides 7, 14, 28.6). A config over this base gives the
# neck `patch_size=16` and `level0_rescale=3.5 / 4`, so that SimpleFeaturePyramid applies
# exactly those factors to the 57x57 tokens instead of first resizing them to the
# stride-16 grid; the coarsest level then reads about 1/50 off its labelled stride 28.
_base_ = ['./oriented-rcnn_dior-r_reobench.py']
model = dict(
    rpn_head=dict(anchor_generator=dict(strides=[4, 7, 14, 28, 56])),
    roi_head=dict(bbox_roi_extractor=dict(featmap_strides=[4, 7, 14, 28])))
