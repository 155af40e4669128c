"""Scenario files: one session on a given state (FORMATS.md, "Scenario")."""

from xce.scenario.loader import Scenario, load_scenario, load_scenario_text

__all__ = ["Scenario", "load_scenario", "load_scenario_text"]
