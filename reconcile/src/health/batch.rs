//! Health of `batch/v1` Jobs and CronJobs, following gitops-engine's `health_job.go`.

use k8s_openapi::api::batch::v1::{CronJob, Job};

use super::Health;

pub(super) fn job(job: &Job) -> Health {
    let conditions = job
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref());
    for condition in conditions.into_iter().flatten() {
        if condition.status != "True" {
            continue;
        }
        match condition.type_.as_str() {
            "Failed" | "FailureTarget" => {
                return Health::degraded(
                    condition
                        .message
                        .clone()
                        .unwrap_or_else(|| "job failed".to_owned()),
                );
            }
            "Complete" | "SuccessCriteriaMet" => return Health::healthy(),
            _ => {}
        }
    }
    if job.spec.as_ref().and_then(|spec| spec.suspend) == Some(true) {
        return Health::progressing("job is suspended");
    }
    Health::progressing("job is running")
}

/// A CronJob is healthy unless its last run failed: the last schedule is later than the last
/// success while no job is active.
pub(super) fn cron_job(cron_job: &CronJob) -> Health {
    let Some(status) = cron_job.status.as_ref() else {
        return Health::healthy();
    };
    let active = status
        .active
        .as_ref()
        .is_some_and(|active| !active.is_empty());
    let last_failed = match (&status.last_schedule_time, &status.last_successful_time) {
        (Some(scheduled), Some(succeeded)) => scheduled.0 > succeeded.0,
        (Some(_), None) => true,
        _ => false,
    };
    if last_failed && !active {
        return Health::degraded("the last scheduled job did not succeed");
    }
    Health::healthy()
}
