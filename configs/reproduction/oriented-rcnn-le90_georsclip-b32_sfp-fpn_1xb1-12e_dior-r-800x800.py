# REOBench reproduction: Oriented R-CNN (le90) on DIOR-R 800x800 with the GeoRSCLIP ViT-B/32
# visual tower, as lx709/REOBench: Detection/configs/DIOR/RS5M_base.py ran it (task
# settings in ../_base_/tasks/oriented-rcnn_dior-r_reobench.py).
_base_ = [
    '../_base_/tasks/oriented-rcnn_dior-r_reobench.py',
    '../_base_/backbones/georsclip-b32.py'
]
model = dict(
    backbone=dict(
        _base_.backbone,
        # GELU, no stochastic depth: the tower as the authors' CLIP class builds it
        # (lx709/REOBench: Detection/mmrotate/models/backbones/CLIP.py calls
        # create_model_and_transforms('ViT-B-32') of the open_clip copy beside it,
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
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
optim_wrapper = dict(optimizer=dict(lr=1e-6))  # RS5M_base.py (others: 1e-5)
