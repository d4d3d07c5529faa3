"""What may leave the service, and in what form: typed results in, published ones out.

Every output (the HTTP API, the Prometheus exporter, the fleet view, the stored views, the
governance report and the audit / intervene files) shows a figure only as this package
publishes it: a cell, event or scheduled axis computed from fewer than
:data:`~monitor.core.privacy.SMALL_CELL` records withheld, counts rounded, per-group
families under secondary suppression, period filters widened to whole release blocks.
What comes back is typed: a figure is :class:`~monitor.publish.shown.Shown` or
:class:`~monitor.publish.shown.Withheld` (and why), inside one record per published
thing; :mod:`~monitor.publish.encode` alone writes the text ``<11`` in place of a
withheld figure, for the JSON and CSV outputs. The outputs only format what comes back; an
import-linter contract keeps them from the primitives of :mod:`monitor.core.privacy`, and
another keeps this package pure (no database, HTTP or metrics client), so the one
safety-critical rule of the service is read, tested and changed here.

``monitor.core.privacy`` keeps the primitives (the threshold, rounding, which groups of a
family to withhold, release blocks); ``monitor.stream.publication`` decides *when* a
cell's figures are released. The modules here hold:

* :mod:`~monitor.publish.shown`: a published figure, ``Shown[T] | Withheld``;
* :mod:`~monitor.publish.encode`: the one encoder of published records as JSON and CSV;
* :mod:`~monitor.publish.rule`: the rule's constants and checks an output states or reads;
* :mod:`~monitor.publish.counts`: one count, and one family of group sizes, as published;
* :mod:`~monitor.publish.cells`: cells, windows, events and audit cells (API, fleet view,
  exporter, audit files);
* :mod:`~monitor.publish.audit`: an offline audit as its files hold it and its report
  reads it;
* :mod:`~monitor.publish.points`: the report's cell points (small-cell rule, guard, a
  scheduled axis on a small cohort);
* :mod:`~monitor.publish.events`: events as stored and published (no window figures);
* :mod:`~monitor.publish.axes`: the scheduled axes (Axis 2, Axis 3), their dispatch, and
  whether the report may read a stored one;
* :mod:`~monitor.publish.equilense`: EquiLense's group metrics and MPPD;
* :mod:`~monitor.publish.rates`: the intervention audit's selection rates;
* :mod:`~monitor.publish.mppd`: the report's re-check of MPPD pair counts;
* :mod:`~monitor.publish.periods`: a report period snapped to whole release blocks;
* :mod:`~monitor.publish.volumes`: monthly record volumes.
"""
