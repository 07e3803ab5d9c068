"""The Fill-mask tab's result as text: the sentence with each mask's own top guess highlighted, the summary
(masks, entropy, target probabilities, warnings) and the joint fill's Markdown. Plain data in, strings out."""
from __future__ import annotations


from engine.probes.heads.fill_mask import FillMaskResult
from engine.probes.heads.joint_fill import JointFill
from explorer.formatting import code, percent, plain_markdown, sig



def highlighted_fill(text: str, mask_token: str, result: FillMaskResult) -> list[tuple[str, str | None]]:
    """The text with each mask replaced by its own top guess, labelled "p" (one mask) or "n: p" (mask n).
    With several masks these guesses are independent, not one sentence the model chose (see ``joint_markdown``)."""
    pieces = text.split(mask_token)
    if len(pieces) - 1 != len(result.masks):
        return [(text, None)]
    out: list[tuple[str, str | None]] = []
    for m, mask in enumerate(result.masks):
        if pieces[m]:
            out.append((pieces[m], None))
        if mask.token_strs:
            label = f"{m + 1}: {percent(mask.scores[0])}" if len(result.masks) > 1 else percent(mask.scores[0])
            out.append((mask.token_strs[0], label))
    if pieces[-1]:
        out.append((pieces[-1], None))
    return out


def summary_markdown(result: FillMaskResult, mask_token: str) -> str:
    """Masks, effective k, entropy per mask, target probabilities and warnings."""
    n = len(result.masks)
    lines = [f"**{n}** {code(mask_token)} token{'s' if n != 1 else ''} · top-{result.top_k} · "
             f"{len(result.tokens)} input tokens · model: {result.source}"]
    entropies = ", ".join(sig(m.entropy) for m in result.masks)
    lines.append(f"Uncertainty (entropy, nats) per mask: {entropies} — lower means a surer guess.")
    for m in result.masks:
        if m.target_probabilities:
            probs = ", ".join(f"{code(t)} {percent(p)}" for t, p in m.target_probabilities.items())
            lines.append(f"{code(mask_token)} {m.index + 1} targets: {probs}")
    lines += [f"⚠️ {w}" for w in result.warnings]
    return "\n\n".join(lines)


def joint_markdown(joint: JointFill | None, mask_token: str, targets_given: bool = False) -> str:
    """The joint fill as Markdown: the filling order ("1. [MASK] 2 → `paris` 91.2%"), the filled sentence and
    the product of the step probabilities; "" without a joint fill (one mask)."""
    if joint is None:
        return ""
    lines = ["**Filled together**: one mask at a time, the surest first; each step sees the words filled "
             "before it.", ""]
    lines += [f"{s.step}. {code(mask_token)} {s.mask + 1} → {code(s.token_str or s.token)} {percent(s.score)}"
              for s in joint.steps]
    lines += ["", f"**{plain_markdown(joint.sequence)}**",
              "", f"{percent(joint.probability)} for this fill in this order (the product of the steps)."]
    if targets_given:
        lines += ["", "_Targets are ignored here: the joint fill ranks the whole vocabulary._"]
    return "\n".join(lines)


