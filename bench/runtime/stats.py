"""Paired-sample statistics for the runtime benchmarks: mean difference and ratio with 95% intervals
(percentile bootstrap over pairs, seeded so a rerun on the same samples prints the same interval)."""
import numpy as np

SEED = 20261202
RESAMPLES = 10000


def _bootstrap(values: np.ndarray, statistic) -> tuple:
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(values), size=(RESAMPLES, len(values)))
    estimates = np.array([statistic(values[row]) for row in picks])
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
        "difference_ci95": _bootstrap(differences, np.mean),
        # Geometric mean of the per-pair ratios.
        "ratio": float(np.exp(np.log(ratios).mean())),
        "ratio_ci95": tuple(float(np.exp(v)) for v in _bootstrap(np.log(ratios), np.mean)),
    }


def describe(result: dict, unit: str, scale: float = 1.0) -> str:
    low, high = result["difference_ci95"]
    rlow, rhigh = result["ratio_ci95"]
    return (f"{result['pairs']} pairs: baseline median {result['baseline_median'] * scale:.2f} {unit}, "
            f"candidate median {result['candidate_median'] * scale:.2f} {unit}; "
            f"difference {result['difference_mean'] * scale:+.2f} {unit} [95% CI {low * scale:+.2f}, {high * scale:+.2f}]; "
            f"ratio {result['ratio']:.3f} [95% CI {rlow:.3f}, {rhigh:.3f}]")
