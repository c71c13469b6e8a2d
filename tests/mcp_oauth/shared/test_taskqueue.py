"""Tasks without a Celery app (mcp_oauth.shared.taskqueue): they run in process."""

from __future__ import annotations


def test_tasks_run_in_process_without_a_celery_app():
    """Celery's implicit default app would send to amqp://localhost, whatever listens there
    (a RabbitMQ of someone else's): without an app of the site's own, the task runs here."""
    from celery import Celery, _state, shared_task

    from mcp_oauth.shared.taskqueue import celery_configured, send_or_run

    ran: list[tuple] = []

    @shared_task(name="tests.record_call")
    def record_call(*args):
        ran.append(args)

    current = _state.get_current_app()
    Celery("default", fixups=[], set_as_current=False).set_current()
    try:
        assert celery_configured() is False
        send_or_run(record_call, 1, "two")
        assert ran == [(1, "two")]
    finally:
        current.set_current()
