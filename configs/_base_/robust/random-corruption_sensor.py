# Corruption-aware training, the held-out recipe: half of the training samples get one of
# the 6 sensor corruptions of REOBench (noise, salt and pepper, blurs, compression, data
# gaps) at a severity drawn from 1-5, drawn anew per sample and epoch (RandomCorruption;
# the epoch reaches the pipeline through EpochIndexSampler/EpochIndexedDataset). The
# environmental and geometric corruptions stay unseen: RobustnessTestLoop reads the pool
# from the training pipeline, marks the sensor columns as seen and scores the others as
# held out (robust/avg_held_out, robust/delta_tp_held_out).
random_corruption = dict(type='RandomCorruption', corruptions='sensor',
                         severities=[1, 2, 3, 4, 5], prob=0.5, seed=0)
