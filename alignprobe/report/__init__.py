"""Turn a CompareResult into something a person reads: an HTML report, a CI summary, figures."""
