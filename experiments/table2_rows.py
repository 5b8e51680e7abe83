"""Which of Table 2's rows experiments/reproduce_table2.py runs: ``quick``, ``all`` or named
rows, the trained rows kept to those whose experiment has the profile, and what each
profile reduces (its description)."""

from __future__ import annotations

QUICK = ("BM25", "Dual-GRUs")


def profile_block(experiment: str, profile: str):
    """The experiment's ``profiles.<profile>`` block (with its shared reductions), {} for
    ``paper``, None when the experiment has no such profile or does not exist."""
    from retrieval_qa.training.compose import load_group

    if profile == "paper":
        return {}
    try:
        return load_group("experiment", experiment).get("profiles", {}).get(profile)
    except FileNotFoundError:
        return None


def reductions(table, wanted: set[str], profile: str) -> dict[str, str]:
    """Row name -> the description of its experiment's profile (what the profile reduces)."""
    found = {}
    for row in table.rows:
        if row.kind == "train" and row.name in wanted:
            block = profile_block(row.experiment, profile)
            if block is not None:
                found[row.name] = str(block.get("description", "")) if block else \
                    "the paper's settings"
    return found


def select_rows(table, rows: str, profile: str = "cpu") -> tuple[set[str], str]:
    """The rows to run. With a profile other than cpu and paper, ``quick`` and ``all`` keep the
    trained rows whose experiment has that profile; a named row without it is an error."""
    names = [r.name for r in table.rows]
    without = {r.name for r in table.rows if r.kind == "train"
               and profile_block(r.experiment, profile) is None} if profile != "cpu" else set()
    if rows in ("", "quick"):
        return set(QUICK) - without, "quick (" + ", ".join(QUICK) + "; ROWS=all for the rest)"
    if rows == "all":
        note = f" (rows with a {profile} profile)" if without else ""
        return set(names) - without, "all" + note
    wanted = {r.strip() for r in rows.split(",") if r.strip()}
    unknown = sorted(wanted - set(names))
    if unknown:
        raise SystemExit(f"unknown row(s) {unknown}; rows: {names}, or quick / all")
    missing = sorted(wanted & without)
    if missing:
        raise SystemExit(f"row(s) {missing} have no `{profile}` profile (conf/experiment/*.yaml "
                         f"`profiles.{profile}`); rows that have one: "
                         f"{[n for n in names if n not in without]}")
    return wanted, ", ".join(n for n in names if n in wanted)
