"""JOBS_* settings: the AWS backend names what it lacks; bad values name their variable."""

from __future__ import annotations

import pytest

from app.settings import load_settings
from common.settings import SettingsError


def test_the_aws_backend_names_the_settings_it_lacks():
    with pytest.raises(
        SettingsError, match="JOBS=aws needs JOBS_QUEUE_URL, JOBS_DEAD_LETTER_URL, JOBS_BUCKET, JOBS_TOPIC_ARN"
    ):
        load_settings(jobs="aws")
    with pytest.raises(SettingsError, match="needs JOBS_DEAD_LETTER_URL, JOBS_TOPIC_ARN"):
        load_settings(jobs="aws", jobs_queue_url="https://sqs.us-east-1.amazonaws.com/1/q", jobs_bucket="b")


def test_the_queue_may_not_give_up_before_the_last_attempt():
    with pytest.raises(SettingsError, match="JOBS_QUEUE_MAX_RECEIVES=2 is below JOBS_MAX_RECEIVES=3"):
        load_settings(jobs_max_receives=3, jobs_queue_max_receives=2)


@pytest.mark.parametrize(
    ("override", "variable"),
    [
        ({"jobs": "sqs"}, "JOBS"),
        ({"jobs_visibility_s": 5}, "JOBS_VISIBILITY_S"),
        ({"jobs_prefix": "no-slash"}, "JOBS_PREFIX"),
        ({"jobs_concurrency": 0}, "JOBS_CONCURRENCY"),
        ({"jobs_poll_s": 30}, "JOBS_POLL_S"),
        ({"jobs_timeout_s": 0}, "JOBS_TIMEOUT_S"),
        ({"jobs_queue_max_receives": 1001}, "JOBS_QUEUE_MAX_RECEIVES"),
    ],
)
def test_bad_job_settings_name_their_variable(override, variable):
    with pytest.raises(SettingsError, match=variable):
        load_settings(**override)
