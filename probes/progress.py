"""The one progress bar every capture shows (tqdm: a notebook widget in Jupyter, a bar on a terminal)."""


def progress_bar(total: int, done: int, enabled: bool, *, unit: str, desc: str):
    """A bar over ``total`` items of which ``done`` were finished before (a resumed capture)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, disable=not enabled, unit=unit, desc=desc, dynamic_ncols=True)
