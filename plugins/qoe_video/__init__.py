"""The qoe-video flavor: caches sized from measured QoE models, placed to save energy."""
