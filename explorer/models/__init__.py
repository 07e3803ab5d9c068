"""The model picker and what stands behind it: the registry of models a visitor can pick (the default, checkpoints,
local folders, hub models), their keys, the allowed local folders, the per-model settings and the description
the picker shows."""
