# REOBench's released segmentation task for the CLIP towers (lx709/REOBench:
# Segmentation/configs/vit_base_win/ViT_CLIP.py and its *_corrupted variants
# RM_ViT_Base__corrupted.py, RM_ViT_Large_CLIP_corrupted.py, RS5M_ViT_corrupted.py):
# upernet_potsdam-5cls_reobench.py with training crops of 224x224 taken after a random
# rescale of the 512x512 patches to 0.5-2 x 224 (img_scale=(224, 224), ratio_range
# (0.5, 2.0)), i.e. at 0.22-0.88 of the resolution the model is tested at; validation and
# test stay on whole 512x512 patches (sliding window of 512, one window).
# Their CLIP wrapper (Segmentation/mmseg/models/backbones/CLIP.py, class CLIP) cannot run
# as released: it is not an nn.Module and has no __call__ (EncoderDecoder cannot call it,
# its weights would be neither trained nor initialised by the segmentor), its forward
# calls open_clip's CLIP.forward_features, which does not exist, and its init_weights
# hard-codes RemoteCLIP-ViT-B-32.pt for every row; the base model file sets the decoder
# widths by commented toggles (768 / 1024 / 1280, left at 1024). The CLIP rows therefore
# keep what the configs state (this pipeline, ImageNet statistics, batch, schedule,
# open_clip's towers built by name) and take the rest from the authors' other ViT rows
# (blocks 3/5/7/11, a simple feature pyramid, no final norm, the tower's own width).
_base_ = ['./upernet_potsdam-5cls_reobench.py']
crop_size = (224, 224)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, dataset=dict(pipeline=train_pipeline))  # ViT_CLIP.py
# what every CLIP row shares; a row config adds its backbone base and links the widths
model = dict(
    # ImageNet statistics (ViT_CLIP.py), not CLIP's own
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375]),
    backbone=dict(
        img_size=224,  # position embedding at the 224-px grid, resampled for 512 px tests
        act_layer='gelu',  # open_clip config name without a pretrained tag: exact GELU
        drop_path_rate=0.0,  # open_clip's default; their configs set none
        out_indices=(3, 5, 7, 11),  # as their other rows and their CLIP draft
        final_norm=False))
# their LayerDecayOptimizerConstructor recognises none of the CLIP wrapper's parameter
# names (backbone.model.visual...): everything at the base lr
optim_wrapper = dict(paramwise_cfg=dict(layer_ids='recipe_none'))
