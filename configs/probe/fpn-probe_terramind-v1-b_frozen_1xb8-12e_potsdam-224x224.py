# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py) and the
# TerraMind v1 base encoder (ViT-B, patch 16, SwiGLU blocks) on its RGB modality: the
# patch embeddings and all 12 blocks frozen, the FPN decoder on blocks 3, 6, 9, 12 (the
# last of each quarter; out_indices counts from 0). As in the official encoder, the final
# LayerNorm applies to the last block's map only.
# - weights: the official file checkpoints/TerraMind_v1_base.pt (Apache-2.0), converted on
#   load (decoder, decoder embeddings, mask token, the encoder embeddings of the other
#   modalities and the fixed position tables dropped);
# - modality: RGB (the patch embedding pre-trained on Sentinel-2 red, green, blue in
#   0-255); Potsdam's red, green and blue (the data preprocessor turns the loaded BGR into
#   RGB before the encoder), named by band_names;
# - normalisation: TerraMind v1's pre-training mean and standard deviation of its RGB
#   modality (terramind_input_stats(['RGB'])).
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py']
checkpoint = 'checkpoints/TerraMind_v1_base.pt'
vit_channels, patch_size = 768, 16  # trunk width, patch size
model = dict(
    data_preprocessor=dict(mean=[87.271, 80.931, 66.667], std=[58.767, 47.663, 42.631]),
    backbone=dict(_delete_=True, type='TerraMind', arch='base', modalities=('RGB', ),
                  band_names=('RED', 'GREEN', 'BLUE'), img_size=224,
                  frozen_stages=12, out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
