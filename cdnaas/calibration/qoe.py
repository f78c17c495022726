"""QoE of simulated viewers: stalls and startup delay turned into MOS, as published.

**Stalls** follow the exponential stalling model of T. Hossfeld, R. Schatz,
M. Seufert, M. Hirth, T. Zinner and P. Tran-Gia, "Quantification of YouTube QoE via
Crowdsourcing", IEEE International Symposium on Multimedia (ISM) 2011, pp. 494-499
(doi:10.1109/ISM.2011.87), fitted on crowdsourced ratings of short clips:

    MOS = 3.50 exp(-(0.15 L + 0.19) N) + 1.50

for ``N`` stalls of ``L`` seconds each. Its scale runs from 5.0 (no stall) down to 1.5,
the 1-5 scale of the CDNaaS paper's MOS and of customers' quality targets (a MOS
target of 4.0 tolerates one stall of about 1 s per window; 3.6, the paper's
"acceptable", one of about 2 s).

**Startup delay** (the time until the first chunk arrived) follows R. K. P. Mok,
E. W. W. Chan and R. K. C. Chang, "Measuring the quality of experience of HTTP video
streaming", IFIP/IEEE International Symposium on Integrated Network Management (IM)
2011, pp. 485-492 (doi:10.1109/INM.2011.5990550). Their regression

    MOS = 4.23 - 0.0672 L_ti - 0.742 L_fr - 0.106 L_tr

is linear in a level (1 low, 2 medium, 3 high) of each impairment, the initial
buffering time's ``L_ti`` being 1 up to 1 s, 2 up to 5 s and 3 beyond. Its terms add, so
its startup term is taken alone: a window where playback started costs
``0.0672 (L_ti - 1)`` MOS, 0 for a start within 1 s, 0.134 beyond 5 s (the whole
regression is not used: it tops out at 3.31, so its MOS could not meet a customer's 4.0
even without a stall). Both studies, and Hossfeld et al.'s "Initial delay vs.
interruptions" (QoMEX 2012), find startup delay weighs far less than stalls; a viewer
whose first chunk never came fails (below).

**Windows and smoothing** follow the CDNaaS paper (section IV-D1): a sample per viewer
and 16 s window; a window with a stall longer than half of it, or after the viewer's
playback ended (failed), scores 1.0; samples are smoothed as
``MOS(i+1) = 0.3 MOS(i) + 0.7 s(i+1)`` (the first window's MOS is its sample), and a
load's MOS is the mean of every viewer's smoothed windows, as the paper's Fig. 10
averages its 16 s samples. T_init counts in the window where the first chunk arrived.
"""
import math
import statistics

from cdnaas.planning import qoe as qoe_model

#: the fit of Hossfeld et al. (ISM 2011): MOS = SCALE exp(-(PER_SECOND L + PER_STALL) N) + FLOOR
SCALE, PER_SECOND, PER_STALL, FLOOR = 3.50, 0.15, 0.19, 1.50
#: MOS of a window that cannot be rated (a stall over half the window, failed playback)
WORST = 1.0
BEST = SCALE + FLOOR
#: Mok, Chan, Chang (IM 2011): MOS per level of initial buffering, and the levels' upper
#: bounds in seconds (level 1 up to 1 s, 2 up to 5 s, 3 beyond)
PER_STARTUP_LEVEL, STARTUP_LEVELS = 0.0672, (1.0, 5.0)
CITATION = ("Hossfeld, Schatz, Seufert, Hirth, Zinner, Tran-Gia: Quantification of YouTube "
            "QoE via Crowdsourcing, IEEE ISM 2011, doi:10.1109/ISM.2011.87; startup delay: "
            "Mok, Chan, Chang: Measuring the quality of experience of HTTP video streaming, "
            "IFIP/IEEE IM 2011")


def stalling_mos(stalls, mean_stall_seconds):
    """The MOS Hossfeld et al. predict for ``stalls`` stalls of ``mean_stall_seconds``."""
    return SCALE * math.exp(-(PER_SECOND * mean_stall_seconds + PER_STALL) * stalls) + FLOOR


def startup_penalty(startup_seconds):
    """MOS Mok et al.'s initial-buffering term takes off for a start after
    ``startup_seconds`` (0 up to 1 s; None: playback did not start in this window)."""
    if startup_seconds is None:
        return 0.0
    level = 1 + sum(startup_seconds > bound for bound in STARTUP_LEVELS)
    return PER_STARTUP_LEVEL * (level - 1)


def window_sample(window, window_seconds):
    """The MOS sample of one viewer's window ``[stalls, stalled s, longest stall s,
    startup s or None, failed]`` (see :mod:`cdnaas.calibration.viewers`): its stalls'
    MOS less the startup delay's penalty where playback started in it."""
    stalls, stalled, longest, startup, failed = window
    if failed or longest > window_seconds / 2:
        return WORST
    return stalling_mos(stalls, stalled / stalls if stalls else 0.0) - startup_penalty(startup)


def smoothed(samples):
    """The paper's moving average of ``samples``: ``MOS(i+1) = 0.3 MOS(i) + 0.7 s(i+1)``,
    from ``s(1)``; the IM's very estimate (:func:`cdnaas.planning.qoe.smooth`)."""
    out = []
    for sample in samples:
        out.append(qoe_model.smooth(out[-1] if out else None, sample))
    return out


def load_mos(windows, window_seconds):
    """Mean smoothed MOS over every viewer and window of one load (None: no viewer)."""
    values = [mos for viewer in windows
              for mos in smoothed([window_sample(w, window_seconds) for w in viewer])]
    return statistics.fmean(values) if values else None


def summary(windows, window_seconds):
    """Figures of one load: MOS, stalls per viewer-minute, startup delays, failed viewers."""
    viewers = len(windows)
    minutes = viewers * len(windows[0]) * window_seconds / 60 if viewers else 0
    stalls = sum(w[0] for viewer in windows for w in viewer)
    startups = sorted(w[3] for viewer in windows for w in viewer if w[3] is not None)
    return {"mos": None if not viewers else round(load_mos(windows, window_seconds), 3),
            "stalls_per_minute": round(stalls / minutes, 3) if minutes else None,
            "startup_p90_s": startups[int(0.9 * (len(startups) - 1))] if startups else None,
            "failed_viewers": sum(1 for viewer in windows if viewer and viewer[-1][4])}
