"""Every audit check, one idea a file; a new data fault is a new file and a line here."""

from alignprobe.audit.checks.base import Check, Scanned
from alignprobe.audit.checks.dataset_tokens import DatasetTokens
from alignprobe.audit.checks.degenerate import Degenerate
from alignprobe.audit.checks.duplicates import Duplicates
from alignprobe.audit.checks.loss_mask import LossMask
from alignprobe.audit.checks.nonfinite import NonFinite
from alignprobe.audit.checks.norm_outliers import NormOutliers
from alignprobe.audit.checks.padding_states import PaddingStates
from alignprobe.audit.checks.repeated_taps import RepeatedTaps
from alignprobe.audit.checks.rows_tokens import RowsTokens
from alignprobe.audit.checks.short_rows import ShortRows
from alignprobe.audit.checks.template_split import TemplateSplit
from alignprobe.audit.checks.unreadable import Unreadable


def all_checks() -> list[Check]:
    return [Unreadable(), RowsTokens(), ShortRows(), NonFinite(), Degenerate(), RepeatedTaps(), NormOutliers(), PaddingStates(),
            Duplicates(), TemplateSplit(), LossMask(), DatasetTokens()]


__all__ = ["Check", "Scanned", "all_checks"]
