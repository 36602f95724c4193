# Oriented R-CNN (le90) as in the REOBench detection protocol -- oriented RPN with
# midpoint-offset coding (anchor scale 8, ratios 0.5/1/2), RoIAlignRotated 7x7,
# shared 2-FC rotated box head; test: RPN NMS 0.8, score 0.05, R-CNN rotated NMS 0.1 --
# on a narrow ResNet-18 (channels 16-128) and a 64-channel FPN for CPU minutes.
angle_version = 'le90'
norm_cfg = dict(type='BN', requires_grad=True)
fpn_channels = 64
model = dict(
    type='mmdet.FasterRCNN',
    data_preprocessor=dict(
        type='mmdet.DetDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_size_divisor=32,
        boxtype2tensor=False),
    backbone=dict(
        type='mmdet.ResNet',
        depth=18,
        stem_channels=16,
        base_channels=16,
        num_stages=4,
        out_indices=(0, 1, 2, 3),
        frozen_stages=-1,
        norm_cfg=norm_cfg,
        norm_eval=False,
        style='pytorch'),
    neck=dict(type='mmdet.FPN', in_channels=[16, 32, 64, 128], out_channels=fpn_channels,
              num_outs=5),
    rpn_head=dict(
        type='OrientedRPNHead',
        in_channels=fpn_channels,
        feat_channels=fpn_channels,
        anchor_generator=dict(type='mmdet.AnchorGenerator', scales=[8], ratios=[0.5, 1.0, 2.0],
                              strides=[4, 8, 16, 32, 64], use_box_type=True),
        bbox_coder=dict(type='MidpointOffsetCoder', angle_version=angle_version,
                        target_means=[0.0] * 6, target_stds=[1.0, 1.0, 1.0, 1.0, 0.5, 0.5]),
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=True, loss_weight=1.0),
        loss_bbox=dict(type='mmdet.SmoothL1Loss', beta=1.0 / 9.0, loss_weight=1.0)),
    roi_head=dict(
        type='mmdet.StandardRoIHead',
        bbox_roi_extractor=dict(
            type='RotatedSingleRoIExtractor',
            roi_layer=dict(type='RoIAlignRotated', out_size=7, sample_num=2, clockwise=True),
            out_channels=fpn_channels,
            featmap_strides=[4, 8, 16, 32]),
        bbox_head=dict(
            type='mmdet.Shared2FCBBoxHead',
            predict_box_type='rbox',
            in_channels=fpn_channels,
            fc_out_channels=256,
            roi_feat_size=7,
            num_classes=4,
            reg_predictor_cfg=dict(type='mmdet.Linear'),
            cls_predictor_cfg=dict(type='mmdet.Linear'),
            bbox_coder=dict(type='DeltaXYWHTRBBoxCoder', angle_version=angle_version,
                            norm_factor=None, edge_swap=True, proj_xy=True,
                            target_means=[0.0] * 5, target_stds=[0.1, 0.1, 0.2, 0.2, 0.1]),
            reg_class_agnostic=True,
            loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
            loss_bbox=dict(type='mmdet.SmoothL1Loss', beta=1.0, loss_weight=1.0))),
    train_cfg=dict(
        rpn=dict(
            assigner=dict(type='mmdet.MaxIoUAssigner', pos_iou_thr=0.7, neg_iou_thr=0.3,
                          min_pos_iou=0.3, match_low_quality=True, ignore_iof_thr=-1,
                          iou_calculator=dict(type='RBbox2HBboxOverlaps2D')),
            sampler=dict(type='mmdet.RandomSampler', num=256, pos_fraction=0.5, neg_pos_ub=-1,
                         add_gt_as_proposals=False),
            allowed_border=0,
            pos_weight=-1,
            debug=False),
        rpn_proposal=dict(nms_pre=1000, max_per_img=1000, nms=dict(type='nms', iou_threshold=0.8),
                          min_bbox_size=0),
        rcnn=dict(
            assigner=dict(type='mmdet.MaxIoUAssigner', pos_iou_thr=0.5, neg_iou_thr=0.5,
                          min_pos_iou=0.5, match_low_quality=False, ignore_iof_thr=-1,
                          iou_calculator=dict(type='RBboxOverlaps2D')),
            sampler=dict(type='mmdet.RandomSampler', num=256, pos_fraction=0.25, neg_pos_ub=-1,
                         add_gt_as_proposals=True),
            pos_weight=-1,
            debug=False)),
    test_cfg=dict(
        rpn=dict(nms_pre=1000, max_per_img=1000, nms=dict(type='nms', iou_threshold=0.8),
                 min_bbox_size=0),
        rcnn=dict(nms_pre=1000, min_bbox_size=0, score_thr=0.05,
                  nms=dict(type='nms_rotated', iou_threshold=0.1), max_per_img=300)))
