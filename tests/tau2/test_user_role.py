"""The customer is a role of the tau2 tasks' own: configured, sampled and kept apart like every role."""

from __future__ import annotations

from combee_fast.config import EndpointSpec, SamplingConfig, SessionConfig, TaskConfig
from combee_fast.learners import resolve
from combee_fast.roles.clients import RoleMap
from combee_fast.roles.spec import task_roles
from combee_fast.tasks.registry import get_task


def test_the_user_role_has_its_own_endpoint_and_sampling() -> None:
    task = get_task("tau2-retail")
    (user,) = task_roles(task)
    assert (user.name, user.pool) == ("user", "simulate")
    config = SessionConfig(task=TaskConfig(name="tau2-retail"),
                           endpoints={"default": EndpointSpec(url="http://127.0.0.1:9001/v1"),
                                      "user": EndpointSpec(url="http://127.0.0.1:9002/v1")},
                           sampling={"user": SamplingConfig(temperature=0.7, max_completion_tokens=123)})
    learner = resolve("ace", "combee").kind.roles
    role_map = RoleMap.from_config(config, (*learner, user))
    urls = {key: role_map.endpoints[index].replicas[0].base_url for key, index in role_map.roles.items()}
    assert urls["user"] == "http://127.0.0.1:9002/v1"
    assert {urls[role.key] for role in learner} == {"http://127.0.0.1:9001/v1"}
    assert role_map.sampling["user"].temperature == 0.7 and role_map.sampling["user"].max_completion_tokens == 123
    assert all(role_map.sampling[role.key].temperature is None for role in learner)


def test_a_task_without_roles_declares_none() -> None:
    assert task_roles(get_task("terminal")) == ()
