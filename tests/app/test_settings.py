"""Settings: safe defaults, and a bad value is one readable error naming the variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.settings import load_settings
from common.settings import SettingsError


def test_defaults_are_safe_for_a_laptop(monkeypatch):
    for name in ("MODEL_ID", "BACKEND", "METRICS", "PORT"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.model_id == "builtin:tiny"
    assert settings.backend == "auto"
    assert settings.metrics == "off"
    assert settings.port == 8000


def test_environment_variables_are_read(monkeypatch):
    monkeypatch.setenv("MAX_BATCH_SIZE", "8")
    monkeypatch.setenv("BACKEND", "cpu")
    settings = load_settings()
    assert settings.max_batch_size == 8 and settings.backend == "cpu"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "http"}, "PORT"),
        ({"BACKEND": "tpu"}, "BACKEND"),
        ({"QUEUE_SIZE": "0"}, "QUEUE_SIZE"),
        ({"METRICS": "prometheus"}, "METRICS"),
        ({"DEFAULT_STEPS": "200", "MAX_STEPS": "100"}, "DEFAULT_STEPS=200 is above MAX_STEPS=100"),
        (
            {"NEURON_SHAPES": "1024x1024,1020x768"},
            "NEURON_SHAPES='1024x1024,1020x768': width 1020 must be a multiple of 8",
        ),
        ({"NEURON_SHAPES": "1024"}, "NEURON_SHAPES='1024': size '1024' is not of the form WIDTHxHEIGHT"),
        ({"NEURON_SHAPES": "512x512,512x512"}, "512x512 is given more than once"),
        ({"NEURON_TENSOR_PARALLEL_SIZE": "0"}, "NEURON_TENSOR_PARALLEL_SIZE"),
    ],
)
def test_bad_values_give_one_readable_error(monkeypatch, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=message):
        load_settings()


def test_python_m_app_exits_2_with_the_message_on_a_bad_setting():
    result = subprocess.run(
        [sys.executable, "-m", "app"],
        env={"PORT": "not-a-port", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "PORT" in result.stderr and "Traceback" not in result.stderr


def test_the_largest_max_steps_runs_on_stable_diffusions_schedule():
    # 1,000 steps indexed past SD's 1,000-timestep schedule (steps_offset 1) and answered 500.
    import torch
    from diffusers import DDIMScheduler

    from app.models.random_pipeline import SD_SCHEDULER
    from app.settings import MAX_SCHEDULE_STEPS

    with pytest.raises(SettingsError, match="MAX_STEPS"):
        load_settings(max_steps=MAX_SCHEDULE_STEPS + 1)
    assert load_settings(max_steps=MAX_SCHEDULE_STEPS).max_steps == MAX_SCHEDULE_STEPS
    scheduler = DDIMScheduler(**SD_SCHEDULER)
    scheduler.set_timesteps(MAX_SCHEDULE_STEPS)
    latents = torch.zeros(1, 4, 8, 8)
    for t in scheduler.timesteps:
        latents = scheduler.step(torch.zeros_like(latents), t, latents).prev_sample
    assert torch.isfinite(latents).all()
