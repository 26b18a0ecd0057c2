"""MMEngine's logging API in rlearn: the code examples of MMEngine's logging design document as written, with
their numbers, and MMEngine's own unit tests for HistoryBuffer, MessageHub, LogProcessor and MMLogger that
apply (adapted; where rlearn deliberately differs, the test says so and docs/logging.md explains why)."""

from __future__ import annotations

import logging
import pickle
import re
import sys
import uuid
from collections import OrderedDict
from unittest.mock import patch

import numpy as np
import pytest
import torch

from rlearn.logging import HistoryBuffer, LogProcessor, LogProcessorConfigError, MessageHub, MMLogger, print_log
from rlearn.monitor import TickMonitor

LINE = r"\d{2}/\d{2} \d{2}:\d{2}:\d{2}"  # the documented 'MM/DD HH:MM:SS'


@pytest.fixture(autouse=True)
def isolated():
    """Each test sees an empty hub registry and the built-in statistics only; both restored afterwards."""
    hubs, stats = MessageHub._instance_dict, dict(HistoryBuffer._statistics_methods)
    MessageHub._instance_dict = OrderedDict()
    yield
    MessageHub._instance_dict = hubs
    HistoryBuffer._statistics_methods.clear()
    HistoryBuffer._statistics_methods.update(stats)


def hub_in_a_run(name="task"):
    """A hub attached to a monitor, as the learner attaches its own."""
    hub = MessageHub.get_instance(name)
    hub.attach(TickMonitor(window_size=10))
    return hub


# ------------------------------------------------------------------ the design document's examples, as written
def test_doc_history_buffer_initialisation_and_update():
    history_buffer = HistoryBuffer()
    log_history, count_history = history_buffer.data
    assert log_history.tolist() == [] and count_history.tolist() == []
    history_buffer = HistoryBuffer([1, 2, 3], [1, 2, 3])
    log_history, count_history = history_buffer.data
    assert log_history.tolist() == [1, 2, 3] and count_history.tolist() == [1, 2, 3]
    with pytest.warns(UserWarning, match=r"length of history buffer \(3\) exceeds the max_length \(2\)"):
        history_buffer = HistoryBuffer([1, 2, 3], [1, 2, 3], max_length=2)
    log_history, count_history = history_buffer.data
    assert log_history.tolist() == [2, 3] and count_history.tolist() == [2, 3]

    history_buffer = HistoryBuffer([1, 2, 3], [1, 1, 1])
    history_buffer.update(4)
    assert [a.tolist() for a in history_buffer.data] == [[1, 2, 3, 4], [1, 1, 1, 1]]
    history_buffer.update(5, 2)
    assert [a.tolist() for a in history_buffer.data] == [[1, 2, 3, 4, 5], [1, 1, 1, 1, 2]]


def test_doc_basic_statistics():
    history_buffer = HistoryBuffer([1, 2, 3], [1, 1, 1])
    assert history_buffer.min(2) == 2 and history_buffer.min() == 1
    assert history_buffer.max(2) == 3 and history_buffer.max() == 3
    assert history_buffer.mean(2) == 2.5 and history_buffer.mean() == 2
    assert HistoryBuffer([1, 2, 3], [2, 2, 2]).mean() == 1
    history_buffer = HistoryBuffer([1, 2, 3], [1, 1, 1])
    history_buffer.update(4, 1)
    assert history_buffer.current() == 4


def test_doc_register_statistics_weighted_mean_as_written():
    @HistoryBuffer.register_statistics
    def weighted_mean(self, window_size, weight):
        assert len(weight) == window_size
        return (self._log_history[-window_size:] * np.array(weight)).sum() / \
            self._count_history[-window_size:]

    history_buffer = HistoryBuffer([1, 2], [1, 1])
    result = history_buffer.statistics('weighted_mean', 2, [2, 1])  # get (2 * 1 + 1 * 2) / (1 + 1)
    # as written the weighted sum (2 * 1 + 1 * 2 = 4) is divided by the count array element by element
    # (MMEngine gives the same): 4 / [1, 1]; the comment's (1 + 1) is the counts' sum, which gives 2
    assert result.tolist() == [4.0, 4.0]
    assert (result * history_buffer._count_history)[0] / history_buffer._count_history.sum() == 2.0
    with pytest.raises(AssertionError):
        history_buffer.statistics('weighted_mean', 2, [2, 1, 3])


def test_doc_statistics_entry_point():
    history_buffer = HistoryBuffer([1, 2, 3], [1, 1, 1])
    assert history_buffer.statistics('mean') == 2
    assert history_buffer.statistics('mean', 2) == 2.5
    with pytest.raises(TypeError):
        history_buffer.statistics('mean', 2, 3)  # wrong arguments
    with pytest.raises(KeyError, match=r"'data' is not a registered statistic; registered: mean, min, max, current"):
        history_buffer.statistics('data')  # data is not a registered statistic


def test_doc_usage_example(capsys):
    logs = dict(lr=HistoryBuffer(), loss=HistoryBuffer())
    max_iter = 10
    log_interval = 5
    for iter in range(1, max_iter + 1):
        lr = iter / max_iter * 0.1
        loss = 1 / iter
        logs['lr'].update(lr, 1)
        logs['loss'].update(loss, 1)
        if iter % log_interval == 0:
            latest_lr = logs['lr'].statistics('current')
            mean_loss = logs['loss'].statistics('mean', log_interval)
            print(f'lr:   {latest_lr}\n'
                  f'loss: {mean_loss}')
    # the document prints 0.12912698412698415: MMEngine's plain float sum, 2 units in the last place off.
    # rlearn's compensated sums give the exactly rounded mean of these five floats (docs/logging.md).
    assert capsys.readouterr().out == "lr:   0.05\nloss: 0.45666666666666667\nlr:   0.1\nloss: 0.12912698412698412\n"
    from fractions import Fraction
    assert float(sum(Fraction(1 / k) for k in range(6, 11)) / 5) == 0.12912698412698412


@pytest.mark.parametrize("in_a_run", [False, True])
def test_doc_message_hub_scalars(in_a_run):
    message_hub = hub_in_a_run() if in_a_run else MessageHub.get_instance('task')
    message_hub.update_scalar('train/loss', 1, 1)
    assert message_hub.get_scalar('train/loss').current() == 1
    message_hub.update_scalar('train/loss', 3, 1)
    assert message_hub.get_scalar('train/loss').mean() == 2
    message_hub.update_scalar('train/lr', 0.1, 1)
    message_hub.update_scalars({'train/time': {'value': 0.1, 'count': 1},
                                'train/data_time': {'value': 0.1, 'count': 1}})
    train_time = message_hub.get_scalar('train/time')
    log_dict = message_hub.log_scalars
    lr_buffer, loss_buffer, time_buffer, data_time_buffer = (
        log_dict['train/lr'], log_dict['train/loss'], log_dict['train/time'],
        log_dict['train/data_time'])
    assert train_time.current() == 0.1 and time_buffer.current() == 0.1 and data_time_buffer.mean() == 0.1
    assert lr_buffer.data[0].tolist() == [0.1] and loss_buffer.data[0].tolist() == [1.0, 3.0]
    assert list(log_dict) == ['train/loss', 'train/lr', 'train/time', 'train/data_time']


def test_doc_runtime_info():
    message_hub = MessageHub.get_instance('task')
    message_hub.update_info('iter', 1)
    assert message_hub.get_info('iter') == 1
    message_hub.update_info('iter', 2)
    assert message_hub.get_info('iter') == 2


@pytest.mark.parametrize("in_a_run", [False, True])
def test_doc_cross_component_example(capsys, in_a_run):
    class LogProcessor:
        def __init__(self, name):
            self.message_hub = MessageHub.get_instance(name)

        def run(self):
            print(f"Learning rate is {self.message_hub.get_scalar('train/lr').current()}")
            print(f"loss is {self.message_hub.get_scalar('train/loss').current()}")
            print(f"meta is {self.message_hub.get_info('meta')}")

    class LrUpdater:
        def __init__(self, name):
            self.message_hub = MessageHub.get_instance(name)

        def run(self):
            self.message_hub.update_scalar('train/lr', 0.001)

    class MetaUpdater:
        def __init__(self, name):
            self.message_hub = MessageHub.get_instance(name)

        def run(self):
            self.message_hub.update_info(
                'meta',
                dict(experiment='retinanet_r50_caffe_fpn_1x_coco.py',
                     repo='mmdetection'))

    class LossUpdater:
        def __init__(self, name):
            self.message_hub = MessageHub.get_instance(name)

        def run(self):
            self.message_hub.update_scalar('train/loss', 0.1)

    class ToyRunner:
        def __init__(self, name):
            self.message_hub = MessageHub.get_instance(name)
            self.log_processor = LogProcessor(name)
            self.updaters = [LossUpdater(name),
                             MetaUpdater(name),
                             LrUpdater(name)]

        def run(self):
            for updater in self.updaters:
                updater.run()
            self.log_processor.run()

    if in_a_run:
        hub_in_a_run('name')
    task = ToyRunner('name')
    task.run()
    assert capsys.readouterr().out == (
        "Learning rate is 0.001\nloss is 0.1\n"
        "meta is {'experiment': 'retinanet_r50_caffe_fpn_1x_coco.py', 'repo': 'mmdetection'}\n")


def test_doc_custom_module_reaches_the_current_hub():
    class CustomModule:
        def __init__(self):
            self.message_hub = MessageHub.get_current_instance()

        def custom_method(self):
            self.message_hub.update_scalar('train/a', 100)
            self.message_hub.update_scalars({'train/b': 1, 'train/c': 2})

    hub = hub_in_a_run()
    CustomModule().custom_method()
    monitor = hub._monitor
    assert [(k, monitor.last(k)) for k in monitor.keys()] == [('train/a', 100.0), ('train/b', 1.0), ('train/c', 2.0)]


def test_doc_log_processor_configs():
    log_processor = dict(window_size=10)
    processor = LogProcessor(**log_processor)
    monitor = TickMonitor(window_size=3)
    processor.prepare(monitor)
    assert monitor.default_window_size == 10
    for i in range(12):
        monitor.update({'loss': float(i)})
        monitor.tick()
    monitor.update({'loss': 12.0})
    assert processor.values(processor.window_stats(monitor, ['loss'])) == {'loss_avg': sum(range(3, 13)) / 10}

    # the document's two custom_cfg examples set by_epoch=True: an RL run has no epochs (docs/logging.md)
    override = dict(window_size=10, by_epoch=True,
                    custom_cfg=[dict(data_src='loss', method_name='mean', window_size=100)])
    with pytest.raises(LogProcessorConfigError, match="by_epoch=True: an RL run has no epochs"):
        LogProcessor(**override)
    override.pop('by_epoch')
    added = dict(window_size=10, custom_cfg=[dict(data_src='loss', log_name='loss_min', method_name='min', window_size=100)])
    for cfg, expected in ((override, {'loss_avg': 6.0}), (added, {'loss_avg': 7.5, 'loss_min': 0.0})):
        processor = LogProcessor(**cfg)
        monitor = TickMonitor(window_size=3)
        processor.prepare(monitor)
        for i in range(13):
            monitor.update({'loss': float(i)})
            monitor.tick()
        assert processor.values(processor.window_stats(monitor, ['loss'], end=12)) == expected


def test_doc_mmlogger(capsys, tmp_path):
    name = f"mmengine.{uuid.uuid4().hex[:6]}"
    logger = MMLogger.get_instance(name, log_level='INFO')
    logger.info("this is a test")
    assert re.fullmatch(rf"{LINE} - {name} - INFO - this is a test\n", capsys.readouterr().out)
    logger.error('division by zero')
    line = sys._getframe().f_lineno - 1
    assert re.fullmatch(rf"{LINE} - {name} - ERROR - {re.escape(__file__)} - test_doc_mmlogger - {line} - division by zero\n",
                        capsys.readouterr().out)
    log_file = tmp_path / "tmp.log"
    logger = MMLogger.get_instance(name + ".file", log_file=str(log_file), log_level='INFO')
    logger.info("this is a test")
    # the file's lines carry the year, as MMEngine's files do ('YYYY/MM/DD HH:MM:SS')
    assert re.fullmatch(rf"\d{{4}}/{LINE} - {name}.file - INFO - this is a test\n", log_file.read_text())
    _close_handlers(logger)


# ------------------------------------------------------------------ MMEngine's HistoryBuffer tests
array_methods = [np.array, lambda x: x, torch.tensor]


def test_mmengine_history_buffer_init():
    assert HistoryBuffer().max_length == 1_000_000
    logs, counts = np.random.randint(1, 10, 1001), np.random.randint(1, 10, 1001)
    with pytest.warns(UserWarning, match="exceeds the max_length"):
        buffer = HistoryBuffer(logs, counts, max_length=1000)
    log_history, count_history = buffer.data
    assert len(log_history) == len(count_history) == 1000
    assert logs[1] == log_history[0] and counts[1] == count_history[0]
    with pytest.raises(ValueError, match="same length"):  # MMEngine: AssertionError
        HistoryBuffer([1, 2], [1])


@pytest.mark.parametrize("array_method", array_methods)
def test_mmengine_history_buffer_update(array_method):
    buffer = HistoryBuffer()
    log_history, count_history = array_method([1, 2, 3, 4, 5]), array_method([5, 5, 5, 5, 5])
    for i in range(len(log_history)):
        buffer.update(float(log_history[i]), float(count_history[i]))
    recorded, counts = buffer.data
    assert [float(a) for a in log_history] == recorded.tolist() and [float(c) for c in count_history] == counts.tolist()
    # a 2-d history longer than max_length keeps the newest values
    with pytest.warns(UserWarning, match="exceeds"):
        buffer = HistoryBuffer(array_method([[-1] + [1] * 99]), array_method([[-1] + [1] * 99]), max_length=99)
    buffer.update(1)
    log_history, count_history = buffer.data
    assert log_history[0] == 1 and count_history[0] == 1 and len(log_history) == 99
    with pytest.raises(TypeError):
        buffer.update(array_method([1, 2]))


@pytest.mark.parametrize("numpy_method, name", [(np.min, "min"), (np.max, "max")])
def test_mmengine_history_buffer_max_min(numpy_method, name):
    log_history = np.random.randint(1, 5, 20)
    buffer = HistoryBuffer(log_history, np.ones(20))
    assert numpy_method(log_history[-10:]) == getattr(buffer, name)(10)
    assert numpy_method(log_history) == getattr(buffer, name)()


def test_mmengine_history_buffer_mean_current_statistics():
    log_history = np.random.randint(1, 5, 20)
    buffer = HistoryBuffer(log_history, np.ones(20))
    assert np.sum(log_history[-10:]) / 10 == buffer.mean(10) and np.sum(log_history) / 20 == buffer.mean()
    assert log_history[-1] == buffer.current()
    with pytest.raises(ValueError):
        HistoryBuffer().current()
    buffer = HistoryBuffer(np.array([1, 2, 3, 4, 5]), np.array([1, 1, 1, 1, 1]))
    assert [buffer.statistics(m) for m in ("mean", "min", "max", "current")] == [3, 1, 5, 5]
    with pytest.raises(KeyError):
        buffer.statistics('unknown')

    @HistoryBuffer.register_statistics
    def custom_statistics(self):
        return -1

    assert HistoryBuffer().statistics('custom_statistics') == -1


# ------------------------------------------------------------------ MMEngine's MessageHub tests
class NoDeepCopy:
    def __deepcopy__(self, memodict=None):
        raise NotImplementedError


def test_mmengine_message_hub_init_update_scalar_and_info():
    message_hub = MessageHub('name')
    assert message_hub.instance_name == 'name' and len(message_hub.log_scalars) == 0
    message_hub = MessageHub.get_instance('mmengine')
    message_hub.update_scalar('name', 1)
    log_buffer = message_hub.log_scalars['name']
    assert (log_buffer._log_history == np.array([1])).all()
    message_hub.update_scalar('name', np.array(1))
    assert (log_buffer._log_history == np.array([1, 1])).all()
    message_hub.update_scalar('name', np.int32(1))
    assert (log_buffer._log_history == np.array([1, 1, 1])).all()
    message_hub.update_info('key', 2)
    message_hub.update_info('key', 1)
    assert message_hub.runtime_info['key'] == 1
    message_hub.update_info_dict({'a': 2, 'b': 3})
    assert message_hub.runtime_info['a'] == 2 and message_hub.runtime_info['b'] == 3
    assert {'a', 'b'} <= set(message_hub.resumed_keys)


@pytest.mark.parametrize("in_a_run", [False, True])
def test_mmengine_get_scalar_and_update_scalars(in_a_run):
    message_hub = hub_in_a_run('mmengine') if in_a_run else MessageHub.get_instance('mmengine')
    with pytest.raises(KeyError, match="no scalar 'unknown'"):
        message_hub.get_scalar('unknown')
    for value in [1, 2, 3, 4, 5]:
        message_hub.update_scalar('test_value', float(value), 1)
    recorded_history, recorded_count = message_hub.get_scalar('test_value').data
    assert recorded_history.tolist() == [1, 2, 3, 4, 5] and recorded_count.tolist() == [1] * 5
    message_hub.update_scalars(dict(loss=1, loss_cls=torch.tensor(2), loss_bbox=np.array(3)))
    assert [message_hub.get_scalar(k).current() for k in ("loss", "loss_cls", "loss_bbox")] == [1, 2, 3]
    if in_a_run:  # every value counts once in a train iteration's window (docs/logging.md)
        with pytest.raises(ValueError, match=r"update_scalar\('loss_iou', count=2\): in a run every recorded value counts once"):
            message_hub.update_scalars(dict(loss_iou=dict(value=1, count=2)))
        with pytest.raises(ValueError, match=r"update_scalar\('loss_iou', count=2\)"):  # nothing of it is recorded
            message_hub.update_scalars(dict(loss=9.0, loss_iou=dict(value=1, count=2)))
        assert message_hub.get_scalar('loss').current() == 1
    else:
        message_hub.update_scalars(dict(loss_iou=dict(value=1, count=2)))
        assert message_hub.get_scalar('loss_iou').mean() == 0.5
    for bad in (dict(error_type=[]), dict(error_type=dict(count=1))):  # MMEngine: AssertionError
        with pytest.raises(TypeError, match="error_type"):
            message_hub.update_scalars(bad)
    with pytest.raises(TypeError, match="'later'"):  # checked first: nothing of a bad dict is recorded
        message_hub.update_scalars({'loss': 7.0, 'later': 'x'})
    assert message_hub.get_scalar('loss').current() == 1


def test_mmengine_state_dict_load_state_dict_and_pickle():
    message_hub = MessageHub.get_instance('test_state_dict')
    message_hub.update_scalar('loss', 0.1)
    message_hub.update_scalar('lr', 0.1, resumed=False)
    message_hub.update_info('iter', 1, resumed=True)
    message_hub.update_info('tensor', [1, 2, 3], resumed=False)
    state_dict = message_hub.state_dict()
    # as in MMEngine: copies of the HistoryBuffers, and the keys that are saved
    assert isinstance(state_dict['log_scalars']['loss'], HistoryBuffer) and 'lr' not in state_dict['log_scalars']
    assert state_dict['log_scalars']['loss'] is not message_hub.get_scalar('loss')
    assert [a.tolist() for a in state_dict['log_scalars']['loss'].data] == [[0.1], [1.0]]
    assert state_dict['runtime_info'] == {'iter': 1} and state_dict['resumed_keys'] == {'loss': True, 'iter': True}
    for name in ('test_load_state_dict2', 'test_load_state_dict3'):
        restored = MessageHub.get_instance(name)
        restored.load_state_dict(state_dict)
        assert [a.tolist() for a in restored.get_scalar('loss').data] == [[0.1], [1.0]]
        assert restored.get_info('iter') == 1
    instance = pickle.loads(pickle.dumps(message_hub))
    assert instance.get_info('feat') is None and instance.get_info('iter') == 1  # MMEngine: ValueError for 'feat'
    assert instance.get_scalar('loss').current() == 0.1


def test_mmengine_get_instance_and_current_instance():
    message_hub = MessageHub.get_current_instance()
    assert MessageHub.get_instance('rlearn') is message_hub  # rlearn's default hub is called 'rlearn'
    MessageHub.get_instance('mmdet')
    assert MessageHub.get_current_instance().instance_name == 'mmdet'


# ------------------------------------------------------------------ MMEngine's LogProcessor tests
def test_mmengine_log_processor_init_and_custom_cfg_checks():
    processor = LogProcessor(window_size=10, by_epoch=False, custom_cfg=None)
    assert not processor.by_epoch and processor.window_size == 10 and processor.custom_cfg == []
    with pytest.raises(LogProcessorConfigError, match="'epoch' windows are not supported"):
        LogProcessor(by_epoch=False, custom_cfg=[dict(data_src='loss', method_name='mean', window_size='epoch')])
    with pytest.raises(LogProcessorConfigError, match="already produces 'loss_1'"):
        LogProcessor(custom_cfg=[dict(data_src='loss', method_name='mean', log_name='loss_1')] * 2)
    with pytest.raises(LogProcessorConfigError, match="already replaces the statistic of 'loss'"):
        LogProcessor(custom_cfg=[dict(data_src='loss', method_name='mean')] * 2)
    LogProcessor(custom_cfg=[
        dict(data_src='loss_cls', window_size=100, method_name='min'),
        dict(data_src='loss', log_name='loss_min', method_name='max'),
        dict(data_src='loss', log_name='loss_max', method_name='max'),
    ])
    with pytest.raises(LogProcessorConfigError, match="window_size must be a positive int or 'global'; got \\[\\]"):
        LogProcessor(custom_cfg=[dict(data_src='loss_cls', method_name='mean', window_size=[])])


def test_mmengine_collect_scalars_statistics():
    """MMEngine's LogProcessor collects 'time' as its window mean and a 'time_max' entry over the whole
    history; here the same entries over a 100-tick run ('global' = since the run started)."""
    rng = np.random.default_rng(0)
    time_scalars, loss_scalars = rng.standard_normal(100), rng.standard_normal(100)
    processor = LogProcessor(window_size=10, custom_cfg=[
        dict(data_src='train/time', method_name='max', log_name='time_max', window_size='global')])
    monitor = TickMonitor()
    processor.prepare(monitor)
    for t, loss in zip(time_scalars.tolist(), loss_scalars.tolist()):
        monitor.update({'train/time': t, 'train/loss_cls': loss})
        monitor.tick()
    out = processor.values(processor.window_stats(monitor, ['train/time', 'train/loss_cls'], end=99))
    assert list(out) == ['train/time_avg', 'train/time_max', 'train/loss_cls_avg']
    assert out['train/time_avg'] == pytest.approx(time_scalars[-10:].mean(), rel=1e-14)
    assert out['train/time_max'] == time_scalars.max()
    assert out['train/loss_cls_avg'] == pytest.approx(loss_scalars[-10:].mean(), rel=1e-14)


# ------------------------------------------------------------------ MMEngine's MMLogger tests
def _close_handlers(logger: logging.Logger) -> None:
    """Close this test's log files (``logging.shutdown()`` would flush every handler of the test process,
    including ones on streams pytest has already closed)."""
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)


@patch('torch.distributed.get_rank', lambda: 0)
@patch('torch.distributed.is_initialized', lambda: True)
@patch('torch.distributed.is_available', lambda: True)
def test_mmengine_mmlogger_rank0(tmp_path):
    name = f"rank0.{uuid.uuid4().hex[:6]}"
    logger = MMLogger.get_instance(name, log_level='INFO')
    assert logger.name == logger.instance_name == name and not logger.propagate
    assert len(logger.handlers) == 1 and isinstance(logger.handlers[0], logging.StreamHandler)
    logger = MMLogger.get_instance(name + "2", log_level='INFO', log_file=str(tmp_path / 'tmp_file.log'))
    assert [type(h) for h in logger.handlers][1] is logging.FileHandler and len(logger.handlers) == 2
    assert MMLogger.get_instance(name + "2") is logger and MMLogger.get_current_instance() is logger
    _close_handlers(logger)


@patch('torch.distributed.get_rank', lambda: 1)
@patch('torch.distributed.is_initialized', lambda: True)
@patch('torch.distributed.is_available', lambda: True)
def test_mmengine_mmlogger_rank1(tmp_path):
    logger = MMLogger.get_instance(f"rank1.{uuid.uuid4().hex[:6]}", log_level='INFO', log_file=str(tmp_path / 'tmp_file.log'),
                                   distributed=True)  # MMEngine writes rank files by default; rlearn when asked
    assert len(logger.handlers) == 2 and logger.handlers[0].level == logging.ERROR
    assert (tmp_path / 'tmp_file_rank1.log').exists()
    _close_handlers(logger)


def test_mmengine_print_log(capsys):
    print_log('welcome', logger=None)
    assert capsys.readouterr().out == 'welcome\n'
    print_log('welcome', logger='silent')
    assert capsys.readouterr().out == ''
    name = f"test_print_log.{uuid.uuid4().hex[:6]}"
    logger = MMLogger.get_instance(name)
    for target in (logger, name, 'current'):
        print_log('welcome', logger=target)
        assert re.fullmatch(rf"{LINE} - {re.escape(name)} - INFO - welcome\n", capsys.readouterr().out)
    with pytest.raises(TypeError):
        print_log('welcome', logger=dict)
    with pytest.raises(ValueError):
        print_log('welcome', logger='unknown')


# ------------------------------------------------------------------ the class and constructor of MMEngine's seed API
def test_mmlogger_is_a_logging_logger_named_as_asked(tmp_path):
    """``get_instance('mmengine', ...)`` is an MMLogger (a ``logging.Logger``) called 'mmengine', the one
    ``logging.getLogger('mmengine')`` finds; ``MMLogger(name, log_file=...)`` builds a private one."""
    shared = MMLogger.get_instance('mmengine', log_level='DEBUG')
    assert isinstance(shared, MMLogger) and isinstance(shared, logging.Logger)
    assert shared.name == shared.instance_name == 'mmengine' and logging.getLogger('mmengine') is shared
    assert shared.level == logging.DEBUG and MMLogger.get_current_instance() is shared
    private = MMLogger(f"private.{uuid.uuid4().hex[:6]}", log_file=str(tmp_path / "own.log"), log_level="WARNING")
    assert private.name == private.instance_name and private is not logging.getLogger(private.name)
    private.warning("kept")
    private.info("below the level")
    assert (tmp_path / "own.log").read_text().endswith("WARNING - kept\n")
    _close_handlers(private)
    _close_handlers(shared)


def test_message_hub_takes_scalars_info_and_resumed_keys_at_construction():
    loss = HistoryBuffer([0.5, 0.25])
    hub = MessageHub('built', log_scalars=OrderedDict(loss=loss), runtime_info=OrderedDict(task='det', iter=3),
                     resumed_keys=OrderedDict(task=False))
    assert hub.instance_name == 'built' and hub.get_scalar('loss') is loss and hub.get_info('task') == 'det'
    assert hub.state_dict()['runtime_info'] == {}  # as in MMEngine: only keys marked resumed are saved
    hub.update_info('epoch_like', 1)
    assert isinstance(hub._resumed_keys, dict) and hub._resumed_keys['task'] is False
    assert hub._resumed_keys['epoch_like'] is True and hub.state_dict()['runtime_info'] == {'epoch_like': 1}
    with pytest.raises(TypeError, match=r"log_scalars\['a'\] must be a HistoryBuffer"):  # MMEngine: AssertionError
        MessageHub('bad', log_scalars=OrderedDict(a=1))
    with pytest.raises(KeyError, match="'iters'"):  # MMEngine: AssertionError
        MessageHub('bad', runtime_info=OrderedDict(iter=1), resumed_keys=OrderedDict(iters=False))
    shared = MessageHub.get_instance(f"with_info.{uuid.uuid4().hex[:6]}", runtime_info={'iter': 7})
    assert shared.get_info('iter') == 7


# ------------------------------------------------------------------ more of what MMEngine's tests check, in rlearn's words
@pytest.mark.parametrize("kind, options", [
    (None, {}),
    ("RotatingFileHandler", dict(maxBytes=1 << 20, backupCount=2)),
    ("TimedRotatingFileHandler", dict(when="MIDNIGHT")),
    ("WatchedFileHandler", {}),
    ("FileHandler", dict(mode="w")),
])
def test_file_handler_cfg_picks_the_handler_of_the_log_file(tmp_path, kind, options):
    log_file = tmp_path / "exp.log"
    log_file.write_text("an earlier run\n")
    cfg = None if kind is None else dict(type=kind, **options)
    logger = MMLogger(f"handlers.{uuid.uuid4().hex[:6]}", log_file=log_file, file_handler_cfg=cfg)
    handler = logger.handlers[-1]
    assert type(handler).__name__ == (kind or "FileHandler") and handler.baseFilename == str(log_file)
    assert cfg is None or cfg["type"] == kind  # the caller's dict is left as it was
    logger.info("one line")
    lines = log_file.read_text().splitlines()
    assert lines[-1].endswith(" - INFO - one line") and re.match(rf"\d{{4}}/{LINE} - ", lines[-1])
    assert len(lines) == (1 if options.get("mode") == "w" else 2)  # appended unless mode='w'
    _close_handlers(logger)


def test_file_handler_cfg_type_must_be_a_file_handler(tmp_path):
    for kind in ("SocketHandler", "NoSuchHandler"):
        with pytest.raises(ValueError, match=f"file_handler_cfg type '{kind}' is not a FileHandler"):
            MMLogger("bad.handler", log_file=tmp_path / "x.log", file_handler_cfg=dict(type=kind))


def test_logger_registry_can_be_cleared_and_levels_changed(capsys):
    name = f"registry.{uuid.uuid4().hex[:6]}"
    logger = MMLogger.get_instance(name)
    assert MMLogger._instance_dict[name] is logger and MMLogger.get_current_instance() is logger
    logger.setLevel("WARNING")  # a later setLevel applies, as on any logging.Logger
    logger.info("hidden")
    logger.warning("shown")
    assert capsys.readouterr().out.endswith(" - WARNING - shown\n")
    saved = MMLogger._instance_dict.copy()
    try:
        MMLogger._instance_dict.clear()
        assert not MMLogger.check_instance_created(name)
        with pytest.raises(ValueError, match="no logger named"):
            print_log("x", logger=name)
        assert MMLogger.get_current_instance().instance_name == "rlearn"  # created when none is left
        again = MMLogger.get_instance(name)
        assert again is logger and len(again.handlers) == 1  # set up again, no second console handler
    finally:
        MMLogger._instance_dict.clear()
        MMLogger._instance_dict.update(saved)


def test_load_state_dict_follows_the_states_resumed_keys():
    state = {"log_scalars": {"loss": HistoryBuffer([1.0, 2.0])},
             "runtime_info": {"iter": 3, "env": "handle", "seed": 7},
             "resumed_keys": {"loss": True, "iter": True, "env": False, "never_set": True}}
    hub = MessageHub("restored")
    hub.update_info("seed", 0, resumed=False)
    hub.load_state_dict(state)
    assert dict(hub.runtime_info) == {"seed": 7, "iter": 3, "env": "handle"}  # every value is loaded
    assert hub._resumed_keys == {"seed": False, "loss": True, "iter": True, "env": False}  # 'never_set' ignored
    saved = hub.state_dict()  # 'env' (False) and 'seed' (not listed: keeps its flag) are not saved again
    assert saved["runtime_info"] == {"iter": 3} and list(saved["log_scalars"]) == ["loss"]
    assert hub.get_scalar("loss") is not state["log_scalars"]["loss"]  # copied


def test_load_state_dict_shares_a_value_that_cannot_be_copied_and_refuses_a_bad_scalar():
    lock = __import__("threading").Lock()
    hub = MessageHub("restored")
    hub.load_state_dict({"log_scalars": {}, "runtime_info": {"lock": lock, "lr": [0.1]}})
    assert hub.get_info("lock") is lock and hub.get_info("lr") == [0.1]
    for scalar in (1, [1.0]):  # MMEngine skips such an entry with a warning and loads the rest
        with pytest.raises(TypeError, match="HistoryBuffer state must be a dict"):
            hub.load_state_dict({"log_scalars": {"good": HistoryBuffer([1.0]), "bad": scalar},
                                 "runtime_info": {"iter": 9}})
        assert hub.get_info("iter") is None and not hub.log_scalars  # nothing of it was loaded
