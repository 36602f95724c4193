# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with ViT-B/16 (timm's
# vit_base_patch16_224, weights augreg2_in21k_ft_in1k) as ImageNetViT: the embeddings and
# all 12 blocks frozen, the FPN decoder on blocks 3, 6, 9, 12 (the last of each quarter;
# out_indices counts from 0), the position embedding resampled to the 32x32 grid on load.
# timm's weight file of that tag, saved once (docs/backbones.md):
#   torch.save(timm.create_model('vit_base_patch16_224.augreg2_in21k_ft_in1k',
#                                pretrained=True).state_dict(), PATH)
# converted on load (classifier dropped); normalisation mean = std = 0.5 (timm's for the
# tag).
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/vit_base_patch16_224.augreg2_in21k_ft_in1k.pth'
vit_channels, patch_size = 768, 16  # trunk width, patch size
model = dict(
    data_preprocessor=dict(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5]),
    backbone=dict(_delete_=True, type='ImageNetViT', arch='b', img_size=512,
                  frozen_stages=12, out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
