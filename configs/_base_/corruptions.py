# Corruption applied by the test pipelines that include this file (ApplyCorruption,
# reobench_mm/transforms/corruption.py). Clean by default; tools/test.py sets it with
#   --corruption NAME --severity K [--seed S] [--protocol P] [--border B]
# or, equivalently, --cfg-options corruption_cfg.corruption=NAME corruption_cfg.severity=K
# (tools/test.py writes corruption_cfg into the test pipelines after the merge).
corruption_cfg = dict(corruption='clean', severity=0, seed=0, protocol='reobench',
                      border='reflect')
