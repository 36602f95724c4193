# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with ViT-L/16 (timm's
# vit_large_patch16_224, weights augreg_in21k_ft_in1k) as ImageNetViT: the embeddings and
# all 24 blocks frozen, the FPN decoder on blocks 6, 12, 18, 24 (the last of each
# quarter; out_indices counts from 0), the position embedding resampled to the 32x32 grid
# on load. timm's weight file of that tag, saved once (docs/backbones.md):
#   torch.save(timm.create_model('vit_large_patch16_224.augreg_in21k_ft_in1k',
#                                pretrained=True).state_dict(), PATH)
# converted on load (classifier dropped); normalisation mean = std = 0.5 (timm's for the
# tag).
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/vit_large_patch16_224.augreg_in21k_ft_in1k.pth'
vit_channels, patch_size = 1024, 16  # trunk width, patch size
model = dict(
    data_preprocessor=dict(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5]),
    backbone=dict(_delete_=True, type='ImageNetViT', arch='l', img_size=512,
                  frozen_stages=24, out_indices=(5, 11, 17, 23),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
