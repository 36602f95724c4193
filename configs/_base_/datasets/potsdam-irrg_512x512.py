# ISPRS Potsdam from its near-infrared/red/green orthophotos (3_Ortho_IRRG.zip), converted
# with tools/dataset_converters/potsdam.py --modality irrg into data/potsdam_irrg: the
# bands of ISPRS Vaihingen, so that Potsdam -> Vaihingen is a shift of place and ground
# sampling distance without a change of bands. Otherwise potsdam_512x512.py.
_base_ = ['./potsdam_512x512.py']
data_root = 'data/potsdam_irrg'
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
