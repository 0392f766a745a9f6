"""DLC's web dashboard: the scheduler's ``webui_url`` (linked from the Mesos UI).

:mod:`dlc.web.dashboard` adds the dashboard's routes to the scheduler's HTTP
API server (the page, its static files, ``/metrics`` and the authenticated
``/v1/dashboard`` snapshot); :mod:`dlc.web.snapshot` builds the snapshot as
pure data; :mod:`dlc.web.series` keeps the sampled time series for the plots.
The browser side is plain JavaScript in ``static/`` (no CDN, no build step).
"""
