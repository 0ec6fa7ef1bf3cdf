//! The pipeline end to end on TFRecord shards of JPEG examples and on image folders.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::Duration;

use towers_data::image_folder::ImageFolder;
use towers_data::inception::{self, BuiltinShards, BuiltinShardsConfig, TfExampleFormat};
use towers_data::tf_example::ImageRecord;
use towers_data::transforms::{InceptionEval, InceptionTrain};
use towers_data::{Error, HostBatch, Pipeline, PipelineConfig, RecordFormat, tfrecord};
use towers_testing::{assert_error_names, report};

fn no_hang<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the pipeline hung")
}

fn shards() -> BuiltinShards {
    BuiltinShards::create(
        BuiltinShardsConfig::new(4, 40)
            .with_train_shards(3)
            .with_validation_shards(2)
            .with_per_shard(6)
            .with_seed(3),
    )
    .unwrap()
}

fn run(
    config: PipelineConfig,
    format: Arc<dyn RecordFormat>,
    files: Vec<PathBuf>,
    size: usize,
    train: bool,
) -> towers_data::Result<Vec<HostBatch>> {
    no_hang(move || {
        let transform: Arc<dyn towers_data::transforms::Transform> = if train {
            Arc::new(InceptionTrain::new(size))
        } else {
            Arc::new(InceptionEval::new(size))
        };
        let take = config.num_epochs.map_or(6, |_| usize::MAX);
        Pipeline::start(config, format, files, transform)?
            .take(take)
            .collect()
    })
}

#[test]
fn validation_shards_are_read_once_in_order_with_their_labels() {
    let data = shards();
    let files = inception::validation_files(data.dir()).unwrap();
    // Labels parsed independently: frame by frame, Example by Example.
    let want: Vec<i64> = files
        .iter()
        .flat_map(|f| {
            let bytes = std::fs::read(f).unwrap();
            tfrecord::index(f).unwrap().into_iter().map(move |s| {
                ImageRecord::parse(&bytes[s.offset as usize..][..s.len - 4])
                    .unwrap()
                    .label
                    - 1
            })
        })
        .collect();
    let config = PipelineConfig::eval(5).with_reader_threads(3);
    let format = Arc::new(TfExampleFormat::new(4).with_label_offset(-1));
    let batches = run(config, format, files, 16, false).unwrap();
    assert_eq!(
        batches.iter().map(HostBatch::len).collect::<Vec<_>>(),
        vec![5, 5, 2]
    );
    assert_eq!(batches[0].image_shape(), [3, 16, 16]);
    let got: Vec<i64> = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    assert_eq!(got, want);
}

#[test]
fn training_batches_repeat_across_reader_counts_and_stay_in_range() {
    let data = shards();
    let files = inception::train_files(data.dir()).unwrap();
    let config = |readers| {
        PipelineConfig::train(4)
            .with_reader_threads(readers)
            .with_read_chunk(2)
            .with_seed(9)
    };
    let format = || Arc::new(TfExampleFormat::new(5));
    let one = run(config(1), format(), files.clone(), 20, true).unwrap();
    let three = run(config(3), format(), files, 20, true).unwrap();
    assert_eq!(one, three);
    assert!(
        one.iter()
            .all(|b| b.images().iter().all(|v| (-1.0..=1.0).contains(v)))
    );
    assert!(
        one.iter()
            .all(|b| b.labels().iter().all(|l| (1..=4).contains(l)))
    );
}

#[test]
fn a_bad_crc_in_one_shard_stops_the_run_naming_shard_and_record() {
    let data = shards();
    let files = inception::train_files(data.dir()).unwrap();
    let spans = tfrecord::index(&files[1]).unwrap();
    let mut bytes = std::fs::read(&files[1]).unwrap();
    bytes[spans[4].offset as usize + 10] ^= 0x40;
    std::fs::write(&files[1], bytes).unwrap();
    let config = PipelineConfig::eval(4).with_reader_threads(2);
    let err = run(config, Arc::new(TfExampleFormat::new(5)), files, 16, false).unwrap_err();
    let msg = report(&err);
    assert_error_names(&msg, &["train-00001-of-00003", "record 4", "CRC"]);
    assert!(
        matches!(err, Error::Thread { .. }),
        "reported with the reader thread: {msg}"
    );
}

#[test]
fn an_image_folder_feeds_the_same_pipeline() {
    let data = shards();
    let root = tempfile::tempdir().unwrap();
    // Unpack the validation shards into root/<class>/<n>.jpg.
    let mut labels = Vec::new();
    for file in inception::validation_files(data.dir()).unwrap() {
        let bytes = std::fs::read(&file).unwrap();
        for (i, s) in tfrecord::index(&file).unwrap().into_iter().enumerate() {
            let r = ImageRecord::parse(&bytes[s.offset as usize..][..s.len - 4]).unwrap();
            let dir = root.path().join(format!("class_{}", r.label));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("{:02}_{i}.jpg", labels.len())), &r.encoded).unwrap();
            labels.push(r.label - 1);
        }
    }
    labels.sort();
    let folder = ImageFolder::scan(root.path()).unwrap();
    let config = PipelineConfig::eval(5).with_reader_threads(2);
    let batches = run(
        config,
        Arc::new(folder.format()),
        folder.files().to_vec(),
        12,
        false,
    )
    .unwrap();
    let got: Vec<i64> = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    assert_eq!(
        got, labels,
        "images come by class, labelled by sorted class folder"
    );
}
