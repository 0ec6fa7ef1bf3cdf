//! Event files written here read back field by field; a file written by TensorFlow's own TF1
//! summary ops (`scripts/make_tf_event_fixture.py`) decodes to the values our histograms and
//! images compute from the same inputs, and re-encodes to its exact bytes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use prost::Message;
use towers_data::Image;
use towers_data::tfrecord::TfRecordWriter;
use towers_testing::{assert_error_names, report};

use super::proto::{Event, Kind, SessionLog, SessionStatus, SourceMetadata, Summary, Value, What};
use super::*;

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn summary_of(event: &Event) -> &[Value] {
    match &event.what {
        Some(What::Summary(Summary { value })) => value,
        other => panic!("not a summary: {other:?}"),
    }
}

fn sample_values() -> Vec<Value> {
    let image = Image::from_hwc((0..2 * 3 * 3).map(|i| i as f32).collect(), 2, 3, 3);
    vec![
        Value::scalar("loss", 2.25),
        Value::histogram(
            "conv1/weight",
            Histogram::of(&[-1.0, 0.5, 3.0]).unwrap().to_proto(),
        ),
        Value::image("tower_0/images/image/0", image_summary(&image).unwrap()),
    ]
}

#[test]
fn a_written_file_reads_back_field_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let before = now();
    let mut writer = EventWriter::create(dir.path(), Duration::from_secs(3600)).unwrap();
    writer.session_start(5).unwrap();
    writer.summary(6, sample_values()).unwrap();
    writer.summary(7, vec![Value::scalar("loss", 2.0)]).unwrap();
    writer.flush().unwrap();
    let path = writer.path().to_path_buf();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let secs: u64 = name
        .strip_prefix("events.out.tfevents.")
        .and_then(|rest| rest.strip_suffix(&format!(".{host}")))
        .unwrap_or_else(|| panic!("{name}"))
        .parse()
        .unwrap();
    assert!(secs as f64 >= before.floor() && secs as f64 <= now());
    assert_eq!(event_files(dir.path()).unwrap(), vec![path.clone()]);

    let events = read_events(&path).unwrap();
    assert_eq!(events.len(), 4);
    for event in &events {
        assert!(event.wall_time >= before && event.wall_time <= now());
    }
    assert_eq!(
        events[0].what,
        Some(What::FileVersion("brain.Event:2".into()))
    );
    assert_eq!(
        events[0].source_metadata,
        Some(SourceMetadata {
            writer: "burn-towers".into()
        })
    );
    assert_eq!(events[1].step, 5);
    assert_eq!(
        events[1].what,
        Some(What::SessionLog(SessionLog {
            status: SessionStatus::Start as i32,
            checkpoint_path: String::new(),
            msg: String::new(),
        }))
    );
    assert_eq!(
        (events[2].step, summary_of(&events[2])),
        (6, &sample_values()[..])
    );
    assert_eq!(events[3].step, 7);
    assert_eq!(summary_of(&events[3]), [Value::scalar("loss", 2.0)]);
    assert!(events[1..].iter().all(|e| e.source_metadata.is_none()));
}

fn write_sample(dir: &Path) -> PathBuf {
    let mut writer = EventWriter::create(dir, Duration::ZERO).unwrap();
    writer.summary(1, sample_values()).unwrap();
    writer.summary(2, sample_values()).unwrap();
    writer.path().to_path_buf()
}

#[test]
fn corrupt_and_truncated_files_are_errors_naming_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_sample(dir.path());
    let good = std::fs::read(&path).unwrap();
    let mut bytes = good.clone();
    let last = bytes.len() - 10;
    bytes[last] ^= 0x40; // inside record 2's data
    std::fs::write(&path, &bytes).unwrap();
    let msg = report(&read_events(&path).unwrap_err());
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert_error_names(&msg, &[&name, "record 2", "data CRC"]);

    std::fs::write(&path, &good[..good.len() - 3]).unwrap();
    let msg = report(&read_events(&path).unwrap_err());
    assert_error_names(&msg, &["record 2", "truncated"]);

    // Framing intact, data not an Event: an Event's field 1 is a double, not a string.
    let mut framed = TfRecordWriter::new(Vec::new());
    framed.write(&[0x0a, 0x02, b'h', b'i']).unwrap();
    std::fs::write(&path, framed.into_inner().unwrap()).unwrap();
    let msg = report(&read_events(&path).unwrap_err());
    assert_error_names(&msg, &["record 0", "not an Event"]);
}

#[test]
fn events_reach_the_file_when_a_flush_is_due_and_on_flush() {
    let dir = tempfile::tempdir().unwrap();
    let on_disk = |p: &Path| std::fs::metadata(p).unwrap().len();
    let mut lazy = EventWriter::create(dir.path(), Duration::from_secs(3600)).unwrap();
    let header = on_disk(lazy.path());
    assert_eq!(
        read_events(lazy.path()).unwrap().len(),
        1,
        "the header is flushed"
    );
    lazy.summary(1, sample_values()).unwrap();
    lazy.flush_if_due().unwrap();
    assert_eq!(on_disk(lazy.path()), header, "not due for an hour");
    lazy.flush().unwrap();
    assert_eq!(read_events(lazy.path()).unwrap().len(), 2);

    let mut eager = EventWriter::create(dir.path(), Duration::ZERO).unwrap();
    assert_ne!(eager.path(), lazy.path(), "same second, another file");
    eager.summary(1, sample_values()).unwrap();
    assert_eq!(read_events(eager.path()).unwrap().len(), 2, "due at once");
    assert_eq!(event_files(dir.path()).unwrap().len(), 2);
}

/// The event file TensorFlow wrote; see the generator for what it holds.
fn tf_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tf_summaries.tfevents")
}

/// The generator's `histogram_values()`.
fn tf_histogram_values() -> Vec<f32> {
    let ramp = (0..30).map(|i| i as f32 * 0.37 - 5.0);
    ramp.chain([0.0, 1e-13, -1e-13, 3e20]).collect()
}

/// The generator's `images()`, as HWC images.
fn tf_images() -> [Image; 2] {
    let mut signed: Vec<f32> = (0..60).map(|i| (i % 17) as f32 * 0.25 - 1.5).collect();
    signed[7] = f32::NAN;
    let positive = (0..60).map(|i| (i % 13) as f32 * 3.0).collect();
    [
        Image::from_hwc(signed, 4, 5, 3),
        Image::from_hwc(positive, 4, 5, 3),
    ]
}

#[test]
fn tensorflows_event_file_holds_what_our_summaries_compute() {
    let events = read_events(&tf_file()).unwrap();
    assert_eq!(events.len(), 4);
    assert_eq!(events[0].what, Some(What::FileVersion(FILE_VERSION.into())));
    assert_eq!(
        events[1].what.as_ref().map(|w| match w {
            What::SessionLog(log) => log.status,
            _ => -1,
        }),
        Some(SessionStatus::Start as i32)
    );

    assert_eq!(events[2].step, 1);
    let values = summary_of(&events[2]);
    assert_eq!(values[0], Value::scalar("loss", 2.5));
    assert_eq!(values[1], Value::scalar("tower_0/loss", 5.0));
    let ours = Histogram::of(&tf_histogram_values()).unwrap().to_proto();
    assert_eq!(values[2], Value::histogram("conv1/weight", ours));
    for (k, image) in tf_images().iter().enumerate() {
        let value = &values[3 + k];
        assert_eq!(value.tag, format!("tower_0/images/image/{k}"));
        let Some(Kind::Image(theirs)) = &value.kind else {
            panic!("{value:?}")
        };
        assert_eq!((theirs.height, theirs.width, theirs.colorspace), (4, 5, 3));
        let pixels = ::image::load_from_memory(&theirs.encoded_image_string)
            .unwrap()
            .to_rgb8()
            .into_raw();
        assert_eq!(pixels, to_u8(image), "image {k}");
    }
    assert_eq!(values.len(), 5);
    assert_eq!(events[3].step, 2);
    assert_eq!(
        summary_of(&events[3]),
        [Value::scalar("learning_rate", 0.1)]
    );
}

#[test]
fn tensorflows_event_file_re_encodes_to_its_own_bytes() {
    let bytes = std::fs::read(tf_file()).unwrap();
    let mut out = TfRecordWriter::new(Vec::new());
    for event in read_events(&tf_file()).unwrap() {
        out.write(&event.encode_to_vec()).unwrap();
    }
    assert_eq!(out.into_inner().unwrap(), bytes);
}

#[test]
fn an_evaluation_writes_its_precisions_to_the_eval_dir() {
    let dir = tempfile::tempdir().unwrap();
    let eval_dir = dir.path().join("eval");
    let precision = crate::eval::Precision {
        examples: 200,
        correct_at_1: 140,
        correct_at_5: Some(190),
    };
    let path = write_precision(&eval_dir, 1500, &precision).unwrap();
    assert!(path.starts_with(&eval_dir));
    let events = read_events(&path).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].step, 1500);
    assert_eq!(
        summary_of(&events[1]),
        [
            Value::scalar("precision_at_1", 0.7),
            Value::scalar("precision_at_5", 0.95)
        ]
    );
}
