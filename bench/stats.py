"""Statistics shared by the benchmark scripts: seeded percentile-bootstrap intervals, paired
(alternated) comparisons, and a Student-t interval for a geometric-mean ratio. Seeded, so a rerun on
the same samples prints the same interval."""
import math

import numpy as np

SEED = 20261202
RESAMPLES = 10000


def bootstrap_ci(values, statistic=np.mean, seed=SEED, resamples=RESAMPLES) -> tuple:
    """95% percentile-bootstrap interval of `statistic` (a numpy reducer taking `axis`) over `values`."""
    values = np.asarray(values, float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    estimates = statistic(values[picks], axis=1)
    return float(np.percentile(estimates, 2.5)), float(np.percentile(estimates, 97.5))


def paired(candidate, baseline) -> dict:
    """candidate[i] and baseline[i] were measured side by side (alternated)."""
    candidate, baseline = np.asarray(candidate, float), np.asarray(baseline, float)
    differences = candidate - baseline
    ratios = candidate / baseline
    return {
        "pairs": len(differences),
        "baseline_median": float(np.median(baseline)),
        "candidate_median": float(np.median(candidate)),
        "difference_mean": float(differences.mean()),
        "difference_ci95": bootstrap_ci(differences),
        # Geometric mean of the per-pair ratios.
        "ratio": float(np.exp(np.log(ratios).mean())),
        "ratio_ci95": tuple(float(np.exp(v)) for v in bootstrap_ci(np.log(ratios))),
    }


def describe(result: dict, unit: str, scale: float = 1.0) -> str:
    low, high = result["difference_ci95"]
    rlow, rhigh = result["ratio_ci95"]
    return (f"{result['pairs']} pairs: baseline median {result['baseline_median'] * scale:.2f} {unit}, "
            f"candidate median {result['candidate_median'] * scale:.2f} {unit}; "
            f"difference {result['difference_mean'] * scale:+.2f} {unit} [95% CI {low * scale:+.2f}, {high * scale:+.2f}]; "
            f"ratio {result['ratio']:.3f} [95% CI {rlow:.3f}, {rhigh:.3f}]")


def t_quantile_95(dof: int) -> float:
    """Two-sided 95% critical value of Student's t (t_{0.975, dof}): the t density integrated from 0
    (Simpson's rule) and the bound found by bisection; 2.201 for 11 degrees of freedom, 2.042 for 30."""
    if dof < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, got {dof}")
    scale = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)) / math.sqrt(dof * math.pi)

    def area(t: float, intervals: int = 2000) -> float:  # P(0 <= T <= t)
        xs = np.linspace(0.0, t, intervals + 1)
        ys = scale * (1 + xs * xs / dof) ** (-(dof + 1) / 2)
        return float((t / intervals / 3) * (ys[0] + ys[-1] + 4 * ys[1:-1:2].sum() + 2 * ys[2:-1:2].sum()))

    low, high = 0.0, 20.0  # t_{0.975, 1} = 12.706
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if area(middle) < 0.475 else (low, middle)
    return (low + high) / 2


def mean_t_interval(values) -> tuple:
    """(mean, low, high): a Student-t 95% interval of the mean (one value: all three are it)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, mean, mean
    half = t_quantile_95(len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def geometric_mean_t_interval(ratios) -> tuple:
    """(geometric mean, low, high): a Student-t 95% interval on the log ratios."""
    return tuple(math.exp(v) for v in mean_t_interval([math.log(r) for r in ratios]))
