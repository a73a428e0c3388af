"""Output types and agents for the typed-answer tests, importable from a framework.json."""

from __future__ import annotations

from pydantic import BaseModel

from agentkeel import Agent, ScriptedModel

WEATHER_JSON = '{"city": "Oslo", "celsius": 4.0}'


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: float


def weather_agent(context_id: str) -> Agent:
    """An agent whose scripted model answers with the weather as JSON."""
    del context_id
    return Agent(ScriptedModel([WEATHER_JSON], repeat=True), name="weather", output_type=Weather)
