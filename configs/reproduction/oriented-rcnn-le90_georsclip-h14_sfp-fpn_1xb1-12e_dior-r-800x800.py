# REOBench reproduction: Oriented R-CNN (le90) on DIOR-R 800x800 with the GeoRSCLIP ViT-H/14
# visual tower, as lx709/REOBench: Detection/configs/DIOR/RS5M_huge.py ran it (task
# settings in ../_base_/tasks/oriented-rcnn_dior-r_reobench_patch14.py).
_base_ = [
    '../_base_/tasks/oriented-rcnn_dior-r_reobench_patch14.py',
    '../_base_/backbones/georsclip-h14.py'
]
model = dict(
    backbone=dict(
        _base_.backbone,
        # GELU, no stochastic depth: the tower as the authors' CLIP class builds it
        # (lx709/REOBench: Detection/mmrotate/models/backbones/CLIP.py calls
        # create_model_and_transforms('ViT-H-14') of the open_clip copy beside it,
        # without a pretrained tag)
        act_layer='gelu',
        drop_path_rate=0.0,
        # the last block through a final LayerNorm feeds all four pyramid levels, as
        # the forward_features of that class does when the tower returns one token
        # map, and as the paper describes (App. F.1). The class also takes one map
        # per level; the forward of the copied tower, which decides, could not be
        # read. It normalises with a LayerNorm of its own (eps 1e-6, starting as the
        # identity) where this backbone applies the tower's trained ln_post.
        pyramid_source='last_block'),
    # the stride-14 tokens are not resampled to the stride-16 grid (neck patch_size=16):
    # CLIP.py's fpn1 is x4 followed by a bilinear x3.5/4 (level 0 about stride 4: 57
    # tokens -> 228 -> 199 px at 800 px), fpn2 x2, fpn3 x1, fpn4 max-pool x1/2 (strides
    # 7, 14, 28.6): the anchor and RoI strides 4/7/14/28 of the task base
    neck=[dict(_base_.model.neck[0], in_channels=_base_.vit_channels, patch_size=16,
               level0_rescale=3.5 / 4),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
optim_wrapper = dict(optimizer=dict(lr=1e-4))  # RS5M_huge.py (others: 1e-5)
