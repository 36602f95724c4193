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
model = dict(data_preprocessor=dict(size=crop_size))
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
