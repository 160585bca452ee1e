//! The job manager on its own (unconfined, a recorder in memory): what the model reads, what
//! it is told once, and the fault paths — a job keel cannot record, an unknown job, a secret
//! split across reads.

use crate::jobs::{EndCause, JobEnding, JobRecorder, JobSlot, JobStart, Jobs, PastJob};
use crate::{ToolServices, WorkspaceGuard};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Records in memory; `refuse` makes `started` fail (a store that cannot be written).
#[derive(Debug, Default)]
struct Memory {
    refuse: bool,
    next: Mutex<u32>,
    said: Mutex<Vec<String>>,
    pids: Mutex<Vec<i32>>,
}

impl JobRecorder for Memory {
    fn next_id(&self) -> Result<String, String> {
        let mut next = self.next.lock().unwrap();
        *next += 1;
        Ok(format!("job-{next}"))
    }
    fn started(&self, job: &JobStart) -> Result<(), String> {
        if self.refuse {
            return Err("the disk is full".into());
        }
        self.said
            .lock()
            .unwrap()
            .push(format!("started {}", job.job));
        self.pids.lock().unwrap().push(job.identity.pgid);
        Ok(())
    }
    fn ended(&self, job: &JobStart, ending: &JobEnding) {
        self.said
            .lock()
            .unwrap()
            .push(format!("ended {} {:?}", job.job, ending.cause));
    }
    fn told(&self, job: &str) {
        self.said.lock().unwrap().push(format!("told {job}"));
    }
}

fn setup(recorder: Arc<Memory>) -> (tempfile::TempDir, Arc<Jobs>, ToolServices) {
    let dir = tempfile::tempdir().unwrap();
    let jobs = Arc::new(Jobs::new(recorder, dir.path().join("spool")));
    let guard = WorkspaceGuard::new(dir.path(), &[]).unwrap();
    let context = ToolServices::new(guard).with_jobs(JobSlot {
        jobs: jobs.clone(),
        call_id: "c1".into(),
    });
    (dir, jobs, context)
}

/// The pid of the job `recorder` saw start last.
fn pid_of(recorder: &Memory) -> i32 {
    *recorder.pids.lock().unwrap().last().unwrap()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
    })
}

#[tokio::test]
async fn a_job_keel_cannot_record_is_stopped_at_once_and_the_call_says_why() {
    let recorder = Arc::new(Memory {
        refuse: true,
        ..Memory::default()
    });
    let (_dir, jobs, context) = setup(recorder);
    let marker = format!("sleep 300.{}8", std::process::id());
    let started =
        tokio::time::timeout(Duration::from_secs(10), jobs.start("c1", &marker, &context))
            .await
            .expect("the unrecorded job was left running: the call waited for it");
    assert!(started.is_error, "{started:?}");
    assert!(started.content.contains("the disk is full"), "{started:?}");
    assert!(started.content.contains("stopped at once"), "{started:?}");
    let left = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "the unrecorded job still runs");
    assert!(jobs.list().is_empty());
}

#[tokio::test]
async fn output_is_read_once_the_end_is_told_once_and_unknown_jobs_are_named() {
    let recorder = Arc::new(Memory::default());
    let (_dir, jobs, context) = setup(recorder.clone());
    let started = jobs
        .start("c1", "echo first; sleep 0.2; echo second; exit 3", &context)
        .await;
    assert!(!started.is_error, "{started:?}");
    assert!(
        started
            .content
            .starts_with("job-1 started in the background")
    );
    // Each read waits for something new: output, then the end.
    let mut seen = String::new();
    for _ in 0..10 {
        let read = jobs.output("job-1", Duration::from_secs(10), None).await;
        seen.push_str(&read.content);
        if read.content.contains("exited") {
            assert!(
                read.content.ends_with("[job-1 exited with code 3]"),
                "{seen}"
            );
            break;
        }
    }
    assert_eq!(seen.matches("first").count(), 1, "{seen}");
    assert_eq!(seen.matches("second").count(), 1, "{seen}");
    assert!(seen.contains("exited with code 3"), "{seen}");
    // Nothing new the second time; its end was seen by that read, so no note follows.
    let again = jobs.output("job-1", Duration::ZERO, None).await;
    assert!(
        again.content.starts_with("(no new output)"),
        "{}",
        again.content
    );
    assert!(jobs.exit_notes().is_empty());
    let unknown = jobs.output("job-7", Duration::ZERO, None).await;
    assert!(unknown.is_error);
    assert_eq!(
        unknown.content,
        "there is no job `job-7`; this session's jobs: job-1"
    );
    let killed = jobs.kill("job-1", None).await;
    assert!(!killed.is_error);
    assert!(
        killed.content.contains("had already ended"),
        "{}",
        killed.content
    );
    let said = recorder.said.lock().unwrap().clone();
    assert_eq!(
        said.iter().filter(|s| *s == "told job-1").count(),
        1,
        "{said:?}"
    );
}

#[tokio::test]
async fn an_end_nobody_read_is_a_note_until_told_and_end_all_stops_the_rest() {
    let recorder = Arc::new(Memory::default());
    let (_dir, jobs, context) = setup(recorder.clone());
    jobs.start("c1", "exit 0", &context).await;
    jobs.start("c1", "sleep 300", &context).await;
    let pid = pid_of(&recorder);
    let since = std::time::Instant::now();
    while jobs.exit_notes().is_empty() && since.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let notes = jobs.exit_notes();
    assert_eq!(
        notes,
        [(
            "job-1".to_string(),
            "[keel: background job job-1 (`exit 0`) exited with code 0.]".to_string()
        )]
    );
    // Not told until the engine says the note was committed.
    assert_eq!(jobs.exit_notes(), notes);
    jobs.told(&["job-1".to_string()]);
    assert!(jobs.exit_notes().is_empty());
    assert_eq!(jobs.running(), 1);
    assert!(alive(pid));
    jobs.end_all(EndCause::SessionEnded);
    assert_eq!(jobs.running(), 0);
    let since = std::time::Instant::now();
    while alive(pid) && since.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(pid), "end_all left {pid} running");
    let said = recorder.said.lock().unwrap().clone();
    assert!(
        said.contains(&"ended job-2 SessionEnded".to_string()),
        "{said:?}"
    );
    assert_eq!(
        said.iter().filter(|s| s.starts_with("ended job-2")).count(),
        1,
        "{said:?}"
    );
}

#[tokio::test]
async fn a_secret_split_across_writes_is_never_read_in_pieces_and_the_hold_is_said() {
    let recorder = Arc::new(Memory::default());
    let (_dir, jobs, mut context) = setup(recorder);
    let secret = "sk-live-0123456789abcdef";
    context.secrets = keel_types::Secrets::default().with_value("DEEPSEEK_API_KEY", secret);
    // The secret comes in two writes, the second long after the first.
    let command = "printf 'key=sk-live-0123'; sleep 1; printf '456789abcdef done'; sleep 300";
    jobs.start("c1", command, &context).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let first = jobs.output("job-1", Duration::ZERO, None).await;
    assert!(!first.content.contains("sk-live"), "{}", first.content);
    assert!(
        first.content.contains("bytes are held back"),
        "{}",
        first.content
    );
    let second = jobs.output("job-1", Duration::from_secs(5), None).await;
    let both = format!("{}{}", first.content, second.content);
    assert!(!both.contains("0123456789"), "{both}");
    assert!(both.contains("[redacted $DEEPSEEK_API_KEY]"), "{both}");
    jobs.end_all(EndCause::SessionEnded);
}

#[tokio::test]
async fn a_job_a_dead_keel_left_is_restored_ended_and_told() {
    let recorder = Arc::new(Memory::default());
    let (_dir, jobs, _context) = setup(recorder);
    let mut child = std::process::Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let identity = crate::process::ProcessIdentity::of(pid).unwrap();
    jobs.restore(vec![PastJob {
        start: JobStart {
            job: "job-4".into(),
            call_id: "c0".into(),
            command: "sleep 300".into(),
            identity,
            started_at_ms: 0,
        },
        ending: None,
        told: false,
    }]);
    let status = child.wait().unwrap();
    assert!(!status.success(), "the left job was killed");
    let notes = jobs.exit_notes();
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0]
            .1
            .contains("the keel process that ran it had ended"),
        "{notes:?}"
    );
    let read = jobs.output("job-4", Duration::ZERO, None).await;
    assert!(
        read.content.contains("earlier keel process"),
        "{}",
        read.content
    );
}

use std::os::unix::process::CommandExt;

#[tokio::test]
async fn what_a_call_read_counts_only_once_its_result_is_committed() {
    let recorder = Arc::new(Memory::default());
    let (_dir, jobs, context) = setup(recorder);
    jobs.start("c1", "echo one-line-of-output; sleep 300", &context)
        .await;
    let first = jobs
        .output("job-1", Duration::from_secs(5), Some("call-a"))
        .await;
    assert!(
        first.content.contains("one-line-of-output"),
        "{}",
        first.content
    );
    // Its result never committed (a crash, a cancel): the next read shows it again.
    let again = jobs.output("job-1", Duration::ZERO, Some("call-b")).await;
    assert!(
        again.content.contains("one-line-of-output"),
        "{}",
        again.content
    );
    jobs.confirm("call-b");
    let after = jobs.output("job-1", Duration::ZERO, Some("call-c")).await;
    assert!(
        after.content.starts_with("(no new output)"),
        "{}",
        after.content
    );
    jobs.end_all(EndCause::SessionEnded);
}
