"""Renderers: turning a Status, a fleet run or a plan into text for people and programs."""
