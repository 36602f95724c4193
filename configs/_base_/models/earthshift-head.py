# EarthShift's simple convolutional head (Doerksen & Kerner 2026, official code's
# SimpleDecoder: Conv2d(C, 256, 3, padding=1) -> ReLU -> Conv2d(256, classes, 1)) as
# MMSegmentation's FCNHead: one 3x3 convolution without norm (bias on), ReLU, no input
# concatenation, no dropout, on the last feature map; its logits are upsampled bilinearly
# (align_corners=False) to the input, as the official model does. Only the initialisation
# differs: MMSegmentation's (3x3: Kaiming normal, fan-out, bias 0; classifier: normal
# std 0.01, bias 0) instead of PyTorch's default. A config sets in_channels (the encoder's
# width) and num_classes:
#   decode_head=dict(_base_.earthshift_head, _delete_=True, in_channels=768, num_classes=6)
earthshift_head = dict(
    type='FCNHead',
    channels=256,  # width of the SimpleDecoder's 3x3 convolution
    in_index=-1,
    num_convs=1,
    kernel_size=3,
    concat_input=False,
    dropout_ratio=0.0,
    norm_cfg=None,
    act_cfg=dict(type='ReLU'),
    align_corners=False,
    loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0))
