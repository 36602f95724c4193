# EarthShift's fine-tuning schedule, full fine-tuning setting: 50 epochs, otherwise as the
# frozen setting's (schedule_earthshift_adamw_40e.py: AdamW, weight decay 0, batch 32 set by
# the configs, lr 1e-4 as a starting value that a sweep overrides): linear warm-up from
# 1e-6 x lr over the first 20 epochs, cosine annealing to 0 over the remaining 30, both
# stepped every iteration (Potsdam, 108 iterations per epoch: 5,400 in all).
_base_ = ['./schedule_earthshift_adamw_40e.py']
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, end_factor=1.0, by_epoch=True, begin=0, end=20,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=30, eta_min=0.0, by_epoch=True, begin=20, end=50,
         convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=50)
