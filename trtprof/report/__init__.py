"""The report page: the page kit, the compare/bench page, the plots."""
