//! The scripted model of a task (`mock.json`), chosen per trial, so a suite runs with no key.
//!
//! A `mock.json` is a `keel mock` scenario (`{"steps": […]}`), or a list of them:
//! `{"scenarios": [{"when": {"variant": "base", "effort": "max", "rep": 3}, "steps": […]}, …]}`,
//! where the first whose `when` matches the trial is used (a field left out matches anything;
//! one without `when` matches every trial). That is how a suite makes some trials of each
//! variant fail, so the table is never trivially full.
//!
//! Invariant: `{marker}` is replaced in the text before it is parsed, so every trial's model
//! answers with that trial's marker; a file that does not parse, or a trial no scenario
//! matches, is an error naming the task.

use crate::EvalError;
use crate::matrix::TrialKey;
use keel_mock::scenario::Scenario;
use serde_json::Value;

/// The scenario `task_mock` scripts for `trial` with `marker`.
pub(crate) fn scenario_for(
    task_name: &str,
    task_mock: &str,
    trial: &TrialKey,
    marker: &str,
) -> Result<Scenario, EvalError> {
    let fail = |message: String| EvalError::Script {
        task: task_name.to_string(),
        message,
    };
    let text = task_mock.replace("{marker}", marker);
    let value: Value = serde_json::from_str(&text).map_err(|error| fail(error.to_string()))?;
    let chosen = match value.get("scenarios") {
        None => value,
        Some(Value::Array(scenarios)) => scenarios
            .iter()
            .find(|scenario| matches(scenario.get("when"), trial))
            .cloned()
            .ok_or_else(|| fail(format!("no scenario matches trial {}", trial.id())))?,
        Some(_) => return Err(fail("`scenarios` must be a list".into())),
    };
    Scenario::parse(&chosen.to_string()).map_err(|error| fail(error.to_string()))
}

fn matches(when: Option<&Value>, trial: &TrialKey) -> bool {
    let Some(when) = when else {
        return true;
    };
    let text = |key: &str, actual: &str| {
        when.get(key)
            .and_then(Value::as_str)
            .is_none_or(|wanted| wanted == actual)
    };
    let rep = when
        .get("rep")
        .and_then(Value::as_u64)
        .is_none_or(|wanted| wanted == u64::from(trial.rep));
    text("variant", trial.variant.name())
        && text("effort", trial.effort.as_deref().unwrap_or("default"))
        && rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Variant;

    fn trial(variant: Variant, rep: u32) -> TrialKey {
        TrialKey {
            model: "mock".into(),
            effort: Some("max".into()),
            task: "t".into(),
            variant,
            rep,
        }
    }

    #[test]
    fn the_first_matching_scenario_is_used_with_the_trials_marker() {
        let mock = r#"{"scenarios": [
            {"when": {"variant": "base", "rep": 3}, "steps": [{"say": "gave up"}]},
            {"steps": [{"say": "the code is {marker}"}]}
        ]}"#;
        let failing = scenario_for("t", mock, &trial(Variant::Base, 3), "m1").unwrap();
        let passing = scenario_for("t", mock, &trial(Variant::Policy, 3), "m2").unwrap();
        assert!(format!("{:?}", failing.steps).contains("gave up"));
        assert!(format!("{:?}", passing.steps).contains("the code is m2"));
    }

    #[test]
    fn a_trial_no_scenario_matches_or_a_broken_file_names_the_task() {
        let only_base =
            r#"{"scenarios": [{"when": {"variant": "base"}, "steps": [{"say": "x"}]}]}"#;
        let error = scenario_for("t", only_base, &trial(Variant::Policy, 1), "m")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("task `t`") && error.contains("no scenario matches"),
            "{error}"
        );
        let error = scenario_for("t", "{", &trial(Variant::Base, 1), "m")
            .unwrap_err()
            .to_string();
        assert!(error.contains("task `t`"), "{error}");
    }
}
