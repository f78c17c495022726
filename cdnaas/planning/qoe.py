"""The QoE estimate: viewers per vCPU -> MOS through the flavor's model, smoothed as the paper does.

A video client keeps one keep-alive connection to its region's balancer, so a
region's viewers are its balancers' active connections. The model predicts the
MOS of HD viewers at a load of viewers per cache vCPU (:meth:`Model.mos`); the
estimate smooths those per-sample predictions like the paper averages MOS
over successive windows::

    MOS(i+1) = 0.3 * MOS(i) + 0.7 * sample(i+1)
"""

#: weight of the previous estimate in the next one
MEMORY = 0.3


def sample(model, viewers, vcpus):
    """The model's MOS for ``viewers`` on ``vcpus`` cache vCPUs; None without a model or vCPUs."""
    if model is None or not vcpus or viewers is None:
        return None
    return model.mos(viewers / vcpus)


def smooth(previous, current):
    """The next estimate from the previous one and the current sample.

    The first sample (no previous estimate) is the estimate; without a sample
    the estimate is unknown (None).
    """
    if current is None:
        return None
    if previous is None:
        return current
    return MEMORY * previous + (1 - MEMORY) * current
