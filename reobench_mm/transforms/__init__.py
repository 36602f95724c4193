"""Pipeline transforms registered for mmseg, mmdet and mmrotate pipelines."""
