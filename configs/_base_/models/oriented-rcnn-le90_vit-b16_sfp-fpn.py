# Oriented R-CNN (le90) on a plain ViT: SimpleFeaturePyramid (strides 4-32) followed by
# the standard 256-channel FPN with 5 outputs; oriented RPN (anchor scale 8, ratios
# 0.5/1/2, midpoint-offset coding), RoIAlignRotated 7x7, shared 2-FC rotated box head;
# test: RPN NMS 0.8, score 0.05, R-CNN rotated NMS 0.1 (REOBench detection protocol).
# The head settings are those of the demo model, at full width. As written: RVSA ViT-B/16
# (768 channels); task configs set the backbone, its channels, patch size and
# normalisation from a backbone base (configs/_base_/backbones/).
_base_ = ['./oriented-rcnn-le90_r18-tiny_fpn.py']
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
fpn_channels = 256
model = dict(
    backbone=dict(_delete_=True, type='RVSA', arch='b', img_size=800, drop_path_rate=0.1),
    neck=[
        dict(type='SimpleFeaturePyramid', in_channels=768, patch_size=16),
        dict(type='mmdet.FPN', in_channels=[768] * 4, out_channels=fpn_channels, num_outs=5),
    ],
    rpn_head=dict(in_channels=fpn_channels, feat_channels=fpn_channels),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=fpn_channels),
        bbox_head=dict(in_channels=fpn_channels, fc_out_channels=1024, num_classes=20)),
    # MMRotate's Oriented R-CNN proposal budgets and R-CNN sample of 512 RoIs per image
    # for full-size images (the REOBench authors' value too; the demo model samples 256)
    train_cfg=dict(rpn_proposal=dict(nms_pre=2000, max_per_img=2000),
                   rcnn=dict(sampler=dict(num=512))),
    test_cfg=dict(rpn=dict(nms_pre=2000, max_per_img=2000), rcnn=dict(max_per_img=2000)))
