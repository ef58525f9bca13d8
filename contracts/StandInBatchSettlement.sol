// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

// STAND-IN CONTRACT. x402BatchSettlement (canonical address
// 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003) ships in no npm package: @x402/evm 2.27 carries its ABI,
// its EIP-712 types and its address, not its bytecode. This contract is written by Tollgate from the
// x402 `batch-settlement` EVM spec and that ABI (same functions, arguments, getters, the Settled
// event, the "x402 Batch Settlement" v1 domain), so the stock client and facilitator run against it
// unchanged. Placed at the canonical address with anvil_setCode, in tests and `tollgate demo` only;
// it holds no constructor state (immutables would be lost by setCode). The tokens, Permit2 and the
// signatures are real. What it does not do like the reference may: it accepts deposits through the
// two canonical collectors only, and guards re-entry with a storage flag (solc 0.8.17 has no
// transient storage).

import {IStandInDepositCollector, safeTransfer} from "./StandInBatchSettlementCollectors.sol";

interface IERC20Balance {
    function balanceOf(address owner) external view returns (uint256);
}

contract StandInBatchSettlement {
    struct ChannelConfig {
        address payer;
        address payerAuthorizer;
        address receiver;
        address receiverAuthorizer;
        address token;
        uint40 withdrawDelay;
        bytes32 salt;
    }

    struct Voucher {
        ChannelConfig channel;
        uint128 maxClaimableAmount;
    }

    struct VoucherClaim {
        Voucher voucher;
        bytes signature;
        uint128 totalClaimed;
    }

    struct Channel {
        uint128 balance; // deposited minus refunded and withdrawn; claimed funds stay counted until settle
        uint128 totalClaimed;
    }

    struct PendingWithdrawal {
        uint128 amount;
        uint40 initiatedAt;
    }

    struct ReceiverTotals {
        uint128 totalClaimed;
        uint128 totalSettled;
    }

    address internal constant ERC3009_DEPOSIT_COLLECTOR = 0x4020806089470a89826cB9fB1f4059150b550004;
    address internal constant PERMIT2_DEPOSIT_COLLECTOR = 0x4020425FAf3B746C082C2f942b4E5159887B0005;
    uint40 internal constant MIN_WITHDRAW_DELAY = 15 minutes;
    uint40 internal constant MAX_WITHDRAW_DELAY = 30 days;

    bytes32 internal constant DOMAIN_TYPEHASH = keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant NAME_HASH = keccak256("x402 Batch Settlement");
    bytes32 internal constant VERSION_HASH = keccak256("1");
    bytes32 public constant CHANNEL_CONFIG_TYPEHASH =
        keccak256("ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)");
    bytes32 public constant VOUCHER_TYPEHASH = keccak256("Voucher(bytes32 channelId,uint128 maxClaimableAmount)");
    bytes32 public constant REFUND_TYPEHASH = keccak256("Refund(bytes32 channelId,uint256 nonce,uint128 amount)");
    bytes32 public constant CLAIM_ENTRY_TYPEHASH = keccak256("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");
    bytes32 public constant CLAIM_BATCH_TYPEHASH =
        keccak256("ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");

    mapping(bytes32 => Channel) public channels;
    mapping(bytes32 => PendingWithdrawal) public pendingWithdrawals;
    /// The nonce the next refundWithSignature must carry; every refund, even one moving nothing, advances it.
    mapping(bytes32 => uint256) public refundNonce;
    mapping(address => mapping(address => ReceiverTotals)) public receivers;
    uint256 private entered; // 0 (never called) or 1: free; 2: inside a state-changing call

    event ChannelCreated(bytes32 indexed channelId, ChannelConfig config);
    event Deposited(bytes32 indexed channelId, address indexed payer, uint128 amount, uint128 balance);
    event Claimed(bytes32 indexed channelId, address indexed receiver, uint128 amount, uint128 totalClaimed);
    event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount);
    event Refunded(bytes32 indexed channelId, address indexed payer, uint128 amount, uint256 nonce);
    event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint256 finalizableAt);
    event Withdrawn(bytes32 indexed channelId, address indexed payer, uint128 amount);
    event ChannelClosed(bytes32 indexed channelId, ChannelConfig config);

    error Reentered();
    error InvalidChannelConfig();
    error WithdrawDelayOutOfRange();
    error InvalidDepositAmount();
    error UnknownCollector();
    error DepositNotReceived();
    error EmptyClaimBatch();
    error MixedReceiverAuthorizers();
    error NotReceiverSide();
    error NotPayerSide();
    error InvalidAuthorizerSignature();
    error InvalidVoucherSignature();
    error ClaimExceedsVoucher();
    error ClaimBelowClaimed();
    error ClaimExceedsBalance();
    error InvalidRefundNonce();
    error InvalidWithdrawAmount();
    error WithdrawalPending();
    error NoPendingWithdrawal();
    error WithdrawDelayNotElapsed();

    modifier nonReentrant() {
        if (entered == 2) revert Reentered();
        entered = 2;
        _;
        entered = 1;
    }

    // ---- deposits ----

    /// Pulls `amount` from the payer through a canonical collector under the payer's authorization in
    /// `collectorData`; the channel is credited only with what actually arrived.
    function deposit(ChannelConfig calldata config, uint128 amount, address collector, bytes calldata collectorData) external nonReentrant {
        checkConfig(config);
        if (amount == 0) revert InvalidDepositAmount();
        if (collector != ERC3009_DEPOSIT_COLLECTOR && collector != PERMIT2_DEPOSIT_COLLECTOR) revert UnknownCollector();
        bytes32 channelId = getChannelId(config);
        uint256 before = IERC20Balance(config.token).balanceOf(address(this));
        IStandInDepositCollector(collector).collect(config.payer, config.token, amount, channelId, collectorData);
        if (IERC20Balance(config.token).balanceOf(address(this)) != before + amount) revert DepositNotReceived();
        Channel storage channel = channels[channelId];
        if (channel.balance == 0) emit ChannelCreated(channelId, config);
        channel.balance += amount;
        emit Deposited(channelId, config.payer, amount, channel.balance);
    }

    // ---- claims and settlement ----

    /// Claims sent by the receiver side itself: no authorizer signature, the sender is the consent.
    function claim(VoucherClaim[] calldata voucherClaims) external nonReentrant {
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            ChannelConfig calldata config = voucherClaims[i].voucher.channel;
            if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) revert NotReceiverSide();
            claimOne(voucherClaims[i], getChannelId(config));
        }
    }

    /// Claims relayed by anyone, many channels in one call, under one ClaimBatch signature of the
    /// receiverAuthorizer all rows share.
    function claimWithSignature(VoucherClaim[] calldata voucherClaims, bytes calldata authorizerSignature) external nonReentrant {
        (bytes32 digest, bytes32[] memory channelIds) = claimBatch(voucherClaims);
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        if (!isValidSignature(authorizer, digest, authorizerSignature)) revert InvalidAuthorizerSignature();
        for (uint256 i = 0; i < voucherClaims.length; ++i) claimOne(voucherClaims[i], channelIds[i]);
    }

    /// Transfers everything claimed and not yet settled for `receiver` in `token`, in one transfer. Permissionless.
    function settle(address receiver, address token) external nonReentrant {
        ReceiverTotals storage totals = receivers[receiver][token];
        uint128 amount = totals.totalClaimed - totals.totalSettled;
        totals.totalSettled = totals.totalClaimed;
        if (amount != 0) safeTransfer(token, receiver, amount);
        emit Settled(receiver, token, msg.sender, amount);
    }

    // ---- cooperative refunds ----

    function refund(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) revert NotReceiverSide();
        refundChannel(config, getChannelId(config), amount);
    }

    function refundWithSignature(ChannelConfig calldata config, uint128 amount, uint256 nonce, bytes calldata receiverAuthorizerSignature)
        external
        nonReentrant
    {
        bytes32 channelId = getChannelId(config);
        if (nonce != refundNonce[channelId]) revert InvalidRefundNonce();
        if (!isValidSignature(config.receiverAuthorizer, getRefundDigest(channelId, nonce, amount), receiverAuthorizerSignature)) {
            revert InvalidAuthorizerSignature();
        }
        refundChannel(config, channelId, amount);
    }

    // ---- the payer's timed withdrawal ----

    /// Starts the grace period during which the receiver can still claim what it was signed for.
    function initiateWithdraw(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        onlyPayerSide(config);
        bytes32 channelId = getChannelId(config);
        Channel storage channel = channels[channelId];
        if (amount == 0 || amount > channel.balance - channel.totalClaimed) revert InvalidWithdrawAmount();
        if (pendingWithdrawals[channelId].initiatedAt != 0) revert WithdrawalPending();
        pendingWithdrawals[channelId] = PendingWithdrawal({amount: amount, initiatedAt: uint40(block.timestamp)});
        emit WithdrawInitiated(channelId, amount, block.timestamp + config.withdrawDelay);
    }

    /// After the delay: pays the payer the pending amount, capped by what is still unclaimed now.
    function finalizeWithdraw(ChannelConfig calldata config) external nonReentrant {
        onlyPayerSide(config);
        bytes32 channelId = getChannelId(config);
        PendingWithdrawal memory pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt == 0) revert NoPendingWithdrawal();
        if (block.timestamp < uint256(pending.initiatedAt) + config.withdrawDelay) revert WithdrawDelayNotElapsed();
        delete pendingWithdrawals[channelId];
        Channel storage channel = channels[channelId];
        uint128 unclaimed = channel.balance - channel.totalClaimed;
        uint128 paid = pending.amount < unclaimed ? pending.amount : unclaimed;
        channel.balance -= paid;
        if (paid != 0) safeTransfer(config.token, config.payer, paid);
        emit Withdrawn(channelId, config.payer, paid);
        if (channel.balance == 0) emit ChannelClosed(channelId, config);
    }

    /// Runs each call on this contract in turn, all or nothing (the facilitator's claim-then-refund).
    function multicall(bytes[] calldata data) external returns (bytes[] memory results) {
        results = new bytes[](data.length);
        for (uint256 i = 0; i < data.length; ++i) {
            (bool ok, bytes memory ret) = address(this).delegatecall(data[i]);
            if (!ok) {
                assembly {
                    revert(add(ret, 32), mload(ret))
                }
            }
            results[i] = ret;
        }
    }

    // ---- views ----

    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    function getChannelId(ChannelConfig calldata config) public view returns (bytes32) {
        return typedDataHash(keccak256(abi.encode(CHANNEL_CONFIG_TYPEHASH, config)));
    }

    function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) public view returns (bytes32) {
        return typedDataHash(keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, maxClaimableAmount)));
    }

    function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) public view returns (bytes32) {
        return typedDataHash(keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount)));
    }

    function getClaimBatchDigest(VoucherClaim[] calldata voucherClaims) external view returns (bytes32 digest) {
        (digest, ) = claimBatch(voucherClaims);
    }

    // ---- internals ----

    function checkConfig(ChannelConfig calldata config) private pure {
        if (config.payer == address(0) || config.receiver == address(0) || config.receiverAuthorizer == address(0) || config.token == address(0)) {
            revert InvalidChannelConfig();
        }
        if (config.withdrawDelay < MIN_WITHDRAW_DELAY || config.withdrawDelay > MAX_WITHDRAW_DELAY) revert WithdrawDelayOutOfRange();
    }

    function onlyPayerSide(ChannelConfig calldata config) private view {
        if (msg.sender != config.payer && (config.payerAuthorizer == address(0) || msg.sender != config.payerAuthorizer)) revert NotPayerSide();
    }

    /// The EIP-712 ClaimBatch digest of the rows and each row's channel id, computed once for both uses.
    function claimBatch(VoucherClaim[] calldata voucherClaims) private view returns (bytes32 digest, bytes32[] memory channelIds) {
        if (voucherClaims.length == 0) revert EmptyClaimBatch();
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        channelIds = new bytes32[](voucherClaims.length);
        bytes32[] memory entries = new bytes32[](voucherClaims.length);
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            VoucherClaim calldata row = voucherClaims[i];
            if (row.voucher.channel.receiverAuthorizer != authorizer) revert MixedReceiverAuthorizers();
            channelIds[i] = getChannelId(row.voucher.channel);
            entries[i] = keccak256(abi.encode(CLAIM_ENTRY_TYPEHASH, channelIds[i], row.voucher.maxClaimableAmount, row.totalClaimed));
        }
        digest = typedDataHash(keccak256(abi.encode(CLAIM_BATCH_TYPEHASH, keccak256(abi.encodePacked(entries)))));
    }

    /// Raises the channel's totalClaimed to the row's `totalClaimed`, within the payer's signed
    /// ceiling and the channel's balance. The same total again is a no-op (a replayed claim moves
    /// nothing); a lower one is refused (totals only grow).
    function claimOne(VoucherClaim calldata row, bytes32 channelId) private {
        uint128 total = row.totalClaimed;
        if (total > row.voucher.maxClaimableAmount) revert ClaimExceedsVoucher();
        Channel storage channel = channels[channelId];
        uint128 already = channel.totalClaimed;
        if (total < already) revert ClaimBelowClaimed();
        if (total == already) return;
        if (total > channel.balance) revert ClaimExceedsBalance();
        ChannelConfig calldata config = row.voucher.channel;
        if (!voucherSigned(config, getVoucherDigest(channelId, row.voucher.maxClaimableAmount), row.signature)) revert InvalidVoucherSignature();
        channel.totalClaimed = total;
        receivers[config.receiver][config.token].totalClaimed += total - already;
        emit Claimed(channelId, config.receiver, total - already, total);
    }

    /// A payerAuthorizer signs with its EOA key (ECDSA only); without one the payer signs, as an EOA or through ERC-1271.
    function voucherSigned(ChannelConfig calldata config, bytes32 digest, bytes memory signature) private view returns (bool) {
        if (config.payerAuthorizer != address(0)) return recover(digest, signature) == config.payerAuthorizer;
        return isValidSignature(config.payer, digest, signature);
    }

    /// The nonce advances first, so even a refund that moves nothing spends its signature.
    function refundChannel(ChannelConfig calldata config, bytes32 channelId, uint128 amount) private {
        uint256 nonce = refundNonce[channelId]++;
        Channel storage channel = channels[channelId];
        uint128 unclaimed = channel.balance - channel.totalClaimed;
        uint128 paid = amount < unclaimed ? amount : unclaimed;
        if (paid == 0) return;
        channel.balance -= paid;
        // What the payer is refunded no longer needs withdrawing: the pending withdrawal shrinks by it.
        PendingWithdrawal storage pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt != 0) {
            if (paid >= pending.amount) delete pendingWithdrawals[channelId];
            else pending.amount -= paid;
        }
        safeTransfer(config.token, config.payer, paid);
        emit Refunded(channelId, config.payer, paid, nonce);
        if (channel.balance == 0) emit ChannelClosed(channelId, config);
    }

    function typedDataHash(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", domainSeparator(), structHash));
    }

    function isValidSignature(address signer, bytes32 digest, bytes memory signature) private view returns (bool) {
        if (signer.code.length == 0) return signer != address(0) && recover(digest, signature) == signer;
        (bool ok, bytes memory ret) = signer.staticcall(abi.encodeWithSelector(0x1626ba7e, digest, signature));
        return ok && ret.length >= 32 && bytes4(abi.decode(ret, (bytes32))) == 0x1626ba7e;
    }

    /// ecrecover of a 65-byte signature; address(0) for any other length or a malleable (high-s) one.
    function recover(bytes32 digest, bytes memory signature) private pure returns (address) {
        if (signature.length != 65) return address(0);
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := mload(add(signature, 32))
            s := mload(add(signature, 64))
            v := byte(0, mload(add(signature, 96)))
        }
        if (uint256(s) > 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0) return address(0);
        return ecrecover(digest, v, r, s);
    }
}
