"""The multiple-comparison corrections the gate offers, by name: what ``gate.correction``
may say, and what each one controls. No numbers here, so checking params loads no numpy;
:mod:`ragvet.gating.significance` applies them."""

CORRECTIONS = ("holm", "bh", "none")
CORRECTION_NAMES = {
    "holm": "Holm (family-wise error rate)",
    "bh": "Benjamini-Hochberg (false discovery rate)",
    "none": "no correction",
}
