"""Corruption engine (numpy/OpenCV only, no OpenMMLab imports)."""
