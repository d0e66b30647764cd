"""Registers mvsink's Airflow UI plugin when this folder is Airflow's plugins folder.

Airflow imports every ``.py`` file of its plugins folder as a top-level module; ``.airflowignore``
keeps it out of the ``mvsink/`` package (whose modules must only be imported as ``mvsink.*``), so this
file is the one it finds. When the package is installed with its ``airflow.plugins`` entry point,
Airflow loads the plugin from there and this file defines nothing (a plugin registered twice would be
reported as a plugin import error).
"""

from importlib.metadata import entry_points

if not any(ep.value.startswith("mvsink.airflow.plugin.") for ep in entry_points(group="airflow.plugins")):
    from mvsink.airflow.plugin.airflow_plugin import MvsinkPlugin

    __all__ = ["MvsinkPlugin"]
